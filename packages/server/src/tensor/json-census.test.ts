import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { countJsonArrays, JsonArrayCounter } from './json-census.ts';

const count = (text: string) => countJsonArrays(Buffer.from(text));

describe('countJsonArrays', () => {
  it('counts the scalars in arrays, strings apart, and the rows of nested data', () => {
    const body = JSON.stringify({
      inputs: [
        {
          name: 'A',
          datatype: 'FP32',
          shape: [2, 2],
          data: [
            [1.5, -2],
            [3e5, 4],
          ],
        },
        { name: 'T', datatype: 'BYTES', shape: [3], data: ['ab', '', 'x,y]"'] },
      ],
      outputs: [{ name: 'O', parameters: { binary_data: true } }],
    });
    expect(count(body)).toEqual({ values: 2 + 4 + 1 + 3, strings: 3, stringBytes: 2 + 0 + 6, containers: 2 + 2 + 1, nonAscii: false });
  });

  it('follows escapes, so a quote or bracket inside a string does not count', () => {
    expect(count('["a\\"]", "\\\\", "[1,2]"]')).toMatchObject({ values: 3, strings: 3 });
  });

  it('counts NaN, Infinity and literals like numbers, and sees text outside ASCII', () => {
    expect(count('[NaN, -Infinity, true, null, 1]')).toMatchObject({ values: 5, strings: 0, nonAscii: false });
    expect(count('["wörld"]')).toMatchObject({ values: 1, stringBytes: 6, nonAscii: true });
  });

  it('counts nothing outside arrays and nothing for empty ones', () => {
    expect(count('{"a": 1, "b": "x", "c": [], "d": {}}')).toEqual({
      values: 0,
      strings: 0,
      stringBytes: 0,
      containers: 0,
      nonAscii: false,
    });
  });

  it('counts the same whatever pieces the text arrives in', () => {
    const text = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'T', shape: [3, 1], data: [['a\\"b', 'wörld'], [12345.678e-9, true, null], []] }],
        parameters: { x: 'y,[z' },
      }),
    );
    const whole = countJsonArrays(text);
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: text.length - 1 }), { maxLength: 12 }), (cuts) => {
        const counter = new JsonArrayCounter();
        let from = 0;
        for (const cut of [...cuts.sort((a, b) => a - b), text.length]) {
          counter.write(text.subarray(from, cut));
          from = cut;
        }
        expect(counter.census).toEqual(whole);
        expect(counter.bytes).toBe(text.length);
      }),
    );
  });
});
