import { describe, expect, it } from 'vitest';
import { fromInferParameters } from './parameters.ts';

describe('fromInferParameters', () => {
  it('maps every oneof case to a plain value', () => {
    expect(
      fromInferParameters(
        {
          priority: { parameter_choice: 'int64_param', int64_param: '2' },
          timeout: { parameter_choice: 'uint64_param', uint64_param: '5000' },
          binary_data_output: { parameter_choice: 'bool_param', bool_param: true },
          note: { parameter_choice: 'string_param', string_param: 'x' },
          ratio: { parameter_choice: 'double_param', double_param: 0.5 },
        },
        'the request',
      ),
    ).toEqual({ priority: 2, timeout: 5000, binary_data_output: true, note: 'x', ratio: 0.5 });
  });

  it('keeps zero values of a set oneof', () => {
    expect(fromInferParameters({ p: { parameter_choice: 'int64_param', int64_param: '0' } }, 'r')).toEqual({ p: 0 });
    expect(fromInferParameters({ b: { parameter_choice: 'bool_param', bool_param: false } }, 'r')).toEqual({ b: false });
  });

  it('refuses integers it cannot hold exactly, and values with no case', () => {
    expect(() =>
      fromInferParameters({ t: { parameter_choice: 'uint64_param', uint64_param: '18446744073709551615' } }, 'the request'),
    ).toThrow(/parameter 't' of the request is 18446744073709551615/);
    expect(() => fromInferParameters({ t: {} }, "input 'X'")).toThrow("parameter 't' of input 'X' has no value");
  });
});
