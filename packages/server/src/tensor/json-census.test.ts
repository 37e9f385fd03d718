import { describe, expect, it } from 'vitest';
import { countJsonArrays } from './json-census.ts';

const count = (text: string) => countJsonArrays(Buffer.from(text));

describe('countJsonArrays', () => {
  it('counts the scalars in arrays, strings apart, and the rows of nested data', () => {
    const body = JSON.stringify({
      inputs: [
        { name: 'A', datatype: 'FP32', shape: [2, 2], data: [[1.5, -2], [3e5, 4]] },
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
    expect(count('{"a": 1, "b": "x", "c": [], "d": {}}')).toEqual({ values: 0, strings: 0, stringBytes: 0, containers: 0, nonAscii: false });
  });
});
