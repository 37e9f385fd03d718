import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseJsonLosslessly, parseTritonJson } from './json-text.ts';

describe('KServe JSON, read as Triton reads it', () => {
  it('keeps integers beyond 2^53 exact, as bigints, and leaves every other number a double', () => {
    const text = '{"data":[9007199254740993,-9223372036854775808,18446744073709551615,9007199254740991,1.5,1e300,12345678901234567.5]}';
    expect(parseTritonJson(text)).toEqual({
      data: [2n ** 53n + 1n, -(2n ** 63n), 2n ** 64n - 1n, 9007199254740991, 1.5, 1e300, 12345678901234567.5],
    });
  });

  it('reads the NaN, Infinity and -Infinity tokens that Python clients write', () => {
    expect(parseTritonJson('{"data":[NaN, Infinity, -Infinity, 0]}')).toEqual({ data: [NaN, Infinity, -Infinity, 0] });
  });

  it("keeps JSON.parse's error for other broken text, and says where the lossless parser stopped", () => {
    expect(() => parseTritonJson('{"inputs":')).toThrow(SyntaxError);
    for (const bad of [
      '',
      '{',
      '[1,]',
      '{"a":1,}',
      '{"a" 1}',
      '[01]',
      '"\\x"',
      '[NaNa]',
      '[1] 2',
      '{"a":"b}',
      '[12345678901234567',
      '"\u0001"',
    ]) {
      expect(() => parseJsonLosslessly(bad), bad).toThrow(SyntaxError);
    }
    expect(() => parseJsonLosslessly('[1,]')).toThrow(/at position 3/);
  });

  it('gives what JSON.parse gives for any JSON text, save bigints for integers beyond 2^53 (property)', () => {
    const asDoubles = (value: unknown): unknown =>
      JSON.parse(JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? Number(v) : v)));
    fc.assert(
      fc.property(fc.jsonValue(), fc.boolean(), (value, pretty) => {
        const text = JSON.stringify(value, null, pretty ? 2 : undefined);
        const parsed = parseJsonLosslessly(text);
        expect(asDoubles(parsed)).toEqual(JSON.parse(text));
        expect(parseTritonJson(text)).toEqual(parsed);
      }),
      { numRuns: 500 },
    );
  });

  it('makes __proto__ an own key, as JSON.parse does, and survives deep nesting', () => {
    const parsed = parseJsonLosslessly('{"__proto__":{"polluted":1}, "n": 12345678901234567890}') as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(['__proto__', 'n']);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    const deep = '['.repeat(200_000) + ']'.repeat(200_000);
    expect(() => parseJsonLosslessly(deep)).not.toThrow();
  });
});
