import { modelConfigFromText } from './from-text.ts';
import type { ModelConfig } from './model-config.ts';
import { parseTextFormat } from './pbtxt/parser.ts';
import { modelConfigType } from './schema.ts';

/**
 * Parses config.pbtxt text. Every syntax or schema error is an InferenceServerError
 * (INVALID_ARG) whose message starts with `<fileName>:<line>:<col>: `.
 */
export function parseModelConfig(text: string, fileName = 'config.pbtxt'): ModelConfig {
  return modelConfigFromText(parseTextFormat(text, fileName), modelConfigType(), fileName);
}
