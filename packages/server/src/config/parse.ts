import { gpuProvidersOf } from './execution-accelerators.ts';
import { ConfigFieldError } from './field-error.ts';
import { modelConfigFromText } from './from-text.ts';
import type { ModelConfig } from './model-config.ts';
import { positionOf } from './pbtxt/locate.ts';
import { parseTextFormat } from './pbtxt/parser.ts';
import { errorAt } from './pbtxt/position.ts';
import { modelConfigType } from './schema.ts';

/**
 * Parses config.pbtxt text. Every syntax or schema error, and every value that cannot be used
 * (an unknown execution accelerator, a bad accelerator parameter), is an InferenceServerError
 * (INVALID_ARG) whose message starts with `<fileName>:<line>:<col>: `.
 */
export function parseModelConfig(text: string, fileName = 'config.pbtxt'): ModelConfig {
  const tree = parseTextFormat(text, fileName);
  const config = modelConfigFromText(tree, modelConfigType(), fileName);
  try {
    gpuProvidersOf(config);
  } catch (error) {
    if (error instanceof ConfigFieldError) throw errorAt(fileName, positionOf(tree, error.path), error.message);
    throw error;
  }
  return config;
}
