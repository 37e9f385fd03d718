import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InferenceServerError } from '../errors/errors.ts';
import { parseModelConfig, printModelConfig } from './index.ts';
import { arbitraryModelConfig } from '../../test-support/model-config-arbitrary.ts';

/** Parsing may succeed or fail, but only ever with a positioned INVALID_ARG. */
function parsesOrFailsCleanly(text: string): void {
  try {
    parseModelConfig(text, 'fuzz.pbtxt');
  } catch (e) {
    expect(e).toBeInstanceOf(InferenceServerError);
    expect((e as InferenceServerError).code).toBe('INVALID_ARG');
    expect((e as Error).message).toMatch(/^fuzz\.pbtxt:\d+:\d+: \S/);
  }
}

const SYNTAX = [
  '{',
  '}',
  '<',
  '>',
  '[',
  ']',
  ':',
  ',',
  ';',
  '-',
  '.',
  '"',
  "'",
  '\\',
  '#',
  '\n',
  ' ',
  '0',
  '1',
  'x',
  'e',
  'f',
  'inf',
  'nan',
  'true',
  '\\x',
  '\\1',
  '\\u',
  'key',
  'value',
  'dims',
  'input',
  'name',
  'max_batch_size',
  'data_type',
  'TYPE_FP32',
  '9007199254740993',
  '0x',
  '1e',
  '\u00e9',
  '\ud800',
];

const mutation = fc.record({
  at: fc.nat(),
  remove: fc.nat({ max: 4 }),
  insert: fc.oneof(fc.constantFrom(...SYNTAX), fc.string({ maxLength: 3 })),
});

describe('parseModelConfig on random and mutated text', () => {
  it('never throws anything but a positioned InferenceServerError on random text', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary' }),
          fc.array(fc.constantFrom(...SYNTAX)).map((t) => t.join('')),
        ),
        parsesOrFailsCleanly,
      ),
      { numRuns: 2000 },
    );
  });

  it('never throws anything but a positioned InferenceServerError on mutated valid configs', () => {
    fc.assert(
      fc.property(arbitraryModelConfig(), fc.array(mutation, { minLength: 1, maxLength: 4 }), (config, mutations) => {
        let text = printModelConfig(config);
        for (const m of mutations) {
          const at = m.at % (text.length + 1);
          text = text.slice(0, at) + m.insert + text.slice(at + m.remove);
        }
        parsesOrFailsCleanly(text);
      }),
      { numRuns: 500 },
    );
  });
});
