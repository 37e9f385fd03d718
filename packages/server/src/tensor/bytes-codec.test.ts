import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isInferenceServerError } from '../errors/errors.ts';
import {
  bytesElementsToStrings,
  countBytesElements,
  deserializeBytesElements,
  firstNonTextElement,
  serializeBytesElements,
} from './bytes-codec.ts';

describe('BYTES codec', () => {
  it('serializes each element as a 4-byte little-endian length and its bytes', () => {
    const data = serializeBytesElements(['ab', new Uint8Array([7]), '']);
    expect([...data]).toEqual([2, 0, 0, 0, 0x61, 0x62, 1, 0, 0, 0, 7, 0, 0, 0, 0]);
  });

  it('round-trips empty and non-ASCII strings as UTF-8', () => {
    const strings = ['', 'wörld', '日本語', '🙂', ''];
    const data = serializeBytesElements(strings);
    expect(countBytesElements(data, 'T')).toBe(5);
    expect(bytesElementsToStrings(data, 'T')).toEqual(strings);
    expect(deserializeBytesElements(data, 'T')[1]).toEqual(new TextEncoder().encode('wörld'));
  });

  it('returns views on the input, not copies, also at an offset', () => {
    const backing = new Uint8Array(64);
    backing.set(serializeBytesElements(['xyz', 'q']), 5);
    const data = backing.subarray(5, 5 + 12);
    const elements = deserializeBytesElements(data, 'T');
    expect(elements.map((e) => e.buffer === backing.buffer)).toEqual([true, true]);
    expect(elements[0]!.byteOffset).toBe(9);
    expect(new TextDecoder().decode(elements[1])).toBe('q');
  });

  it('finds the first element that is not NUL-free UTF-8 text', () => {
    expect(firstNonTextElement(serializeBytesElements(['a', '', 'wörld', '🙂']), 'T')).toBe(-1);
    expect(firstNonTextElement(serializeBytesElements(['a', Uint8Array.of(0x62, 0), Uint8Array.of(0xff)]), 'T')).toBe(1);
    expect(firstNonTextElement(serializeBytesElements(['a', 'b', Uint8Array.of(0xc3)]), 'T')).toBe(2);
  });

  it('an empty buffer holds no elements', () => {
    expect(deserializeBytesElements(new Uint8Array(0), 'T')).toEqual([]);
  });

  it('refuses a length that runs past the end, naming the tensor and the element', () => {
    const data = Uint8Array.from([1, 0, 0, 0, 0x61, 200, 0, 0, 0, 0x62]);
    expect(() => deserializeBytesElements(data, 'TEXT')).toThrow(/'TEXT'.*element 1 declares 200 bytes but only 1 remain/);
    expect(() => countBytesElements(data, 'TEXT')).toThrow(/INVALID_ARG|'TEXT'/);
  });

  it('refuses a truncated length prefix, naming the tensor and the element', () => {
    const data = Uint8Array.from([0, 0, 0, 0, 5, 0]);
    expect(() => bytesElementsToStrings(data, 'TEXT')).toThrow(/'TEXT'.*element 1 has a truncated 4-byte length prefix/);
  });

  it('a length near 2^32 does not wrap around', () => {
    const data = Uint8Array.from([0xff, 0xff, 0xff, 0xff, 1, 2]);
    expect(() => countBytesElements(data, 'T')).toThrow(/element 0 declares 4294967295 bytes/);
  });

  it('property: serialize then deserialize gives back the elements', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 20 }), (elements) => {
        const data = serializeBytesElements(elements);
        expect(countBytesElements(data, 'T')).toBe(elements.length);
        expect(deserializeBytesElements(data, 'T').map((e) => [...e])).toEqual(elements.map((e) => [...e]));
      }),
    );
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'grapheme' }), { maxLength: 20 }), (strings) => {
        expect(bytesElementsToStrings(serializeBytesElements(strings), 'T')).toEqual(strings);
      }),
    );
  });

  it('property: arbitrary or mutated bytes either parse consistently or throw INVALID_ARG', () => {
    const mutated = fc
      .tuple(fc.array(fc.uint8Array({ maxLength: 10 }), { maxLength: 6 }), fc.nat(), fc.integer({ min: 0, max: 255 }), fc.nat())
      .map(([elements, at, value, cut]) => {
        const data = serializeBytesElements(elements);
        if (data.length > 0) data[at % data.length] = value;
        return data.subarray(0, data.length - (cut % (data.length + 1)));
      });
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 40 }), mutated), (data) => {
        let elements: Uint8Array[];
        try {
          elements = deserializeBytesElements(data, 'T');
        } catch (e) {
          expect(isInferenceServerError(e) && e.code === 'INVALID_ARG').toBe(true);
          expect(() => countBytesElements(data, 'T')).toThrow();
          return;
        }
        expect(countBytesElements(data, 'T')).toBe(elements.length);
        expect(serializeBytesElements(elements)).toEqual(data);
      }),
    );
  });
});
