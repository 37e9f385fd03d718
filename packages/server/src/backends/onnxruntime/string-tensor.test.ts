import { describe, expect, it } from 'vitest';
import { serializeBytesElements } from '../../tensor/bytes-codec.ts';
import { ortStringsOf } from './string-tensor.ts';

describe('ortStringsOf', () => {
  it('decodes each element as UTF-8, U+FFFD included when it was sent as such', () => {
    const strings = ['', 'a', 'wörld', '日本語', '🙂', '\uFFFD'];
    expect(ortStringsOf(serializeBytesElements(strings), 'T')).toEqual(strings);
  });

  it('reads a view at an offset', () => {
    const backing = new Uint8Array(32);
    backing.set(serializeBytesElements(['xyz', 'q']), 3);
    expect(ortStringsOf(backing.subarray(3, 15), 'T')).toEqual(['xyz', 'q']);
  });

  it('refuses invalid UTF-8 and NUL bytes, naming the element and the input', () => {
    expect(() => ortStringsOf(serializeBytesElements(['ok', Uint8Array.of(0x61, 0xff)]), 'IN')).toThrow(
      "element 1 of BYTES input 'IN' is not valid UTF-8, which ONNX Runtime string tensors require",
    );
    expect(() => ortStringsOf(serializeBytesElements(['a\0b']), 'IN')).toThrow("element 0 of BYTES input 'IN' contains a NUL byte");
  });
});
