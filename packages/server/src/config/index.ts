export { autoCompleteModelConfig, DEFAULT_MAX_BATCH_SIZE } from './auto-complete.ts';
export type * from './model-config.ts';
export type { ModelIO, ModelTensorInfo } from './model-io.ts';
export { normalizeModelConfig, type NormalizeOptions } from './normalize.ts';
export { parseModelConfig } from './parse.ts';
export { printModelConfig } from './print.ts';
export { modelConfigToJson } from './to-json.ts';
export { MODEL_CONFIG_PROTO_PATH, modelConfigRoot } from './schema.ts';
export { validateDeclaredConfig, validateModelConfig } from './validate.ts';
export { configPaths, type ConfigPath } from './config-paths.ts';
export { describeStep, isEnsembleConfig, planEnsemble, type EnsemblePlan, type EnsembleStep } from './ensemble.ts';
export {
  CORRID_DATATYPES,
  SEQUENCE_IDLE_DEFAULT_MICROSECONDS,
  sequenceControlsOf,
  sequenceStatesOf,
  sequenceTensorNames,
  type BooleanControl,
  type CorridControl,
  type CorridDatatype,
  type SequenceControls,
  type SequenceStateSpec,
} from './sequence-batching.ts';
