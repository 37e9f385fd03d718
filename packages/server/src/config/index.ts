export { autoCompleteModelConfig, DEFAULT_MAX_BATCH_SIZE } from './auto-complete.ts';
export type * from './model-config.ts';
export type { ModelIO, ModelTensorInfo } from './model-io.ts';
export { normalizeModelConfig, type NormalizeOptions } from './normalize.ts';
export { parseModelConfig } from './parse.ts';
export { printModelConfig } from './print.ts';
export { modelConfigToJson } from './to-json.ts';
export { MODEL_CONFIG_PROTO_PATH, modelConfigRoot } from './schema.ts';
export { validateModelConfig } from './validate.ts';
