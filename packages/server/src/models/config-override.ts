import { parseModelConfig, printModelConfig } from '../config/index.ts';
import { modelConfigFromProtobufJson } from '../config/from-json.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { Errors, InferenceServerError } from '../errors/errors.ts';
import { checkConfigPathsLexically } from '../repository/model-paths.ts';

/**
 * The repository extension's config override: model configuration JSON, checked like
 * config.pbtxt, and every path it names inside the model's folder before anything is read.
 */
export function configFromJson(name: string, json: string): ModelConfig {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    throw Errors.invalidArg(`failed to load '${name}': the config parameter is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw Errors.invalidArg(`failed to load '${name}': the config parameter must be a JSON object`);
  }
  try {
    const fields = modelConfigFromProtobufJson(parsed as Record<string, unknown>);
    const config = parseModelConfig(
      printModelConfig({ input: [], output: [], max_batch_size: 0, ...fields, name } as ModelConfig),
      `${name} (load config override)`,
    );
    checkConfigPathsLexically(config, `model '${name}'`);
    return config;
  } catch (error) {
    if (error instanceof InferenceServerError) throw Errors.invalidArg(`failed to load '${name}': ${error.message}`);
    throw error;
  }
}
