import { isDecoupled } from './transaction-policy.ts';
import { InferenceServerError } from '../errors/errors.ts';
import { CONFIG_TYPE_TO_DATATYPE } from '../tensor/datatype.ts';
import type { ModelConfig, ModelInput, ModelInstanceGroup, ModelOutput } from './model-config.ts';
import type { ModelIO, ModelTensorInfo } from './model-io.ts';
import { sequenceTensorNames, validateSequenceBatching } from './sequence-batching.ts';
import { elementCount, fixedRuns, formatDims, hasBatchDim, modelFacingDims, WILDCARD_DIM } from './shape-rules.ts';

type Tensor = ModelInput | ModelOutput;
type Kind = 'input' | 'output';

/**
 * Checks a (completed) config against itself and against what the model file declares.
 * Throws InferenceServerError INVALID_ARG naming the model and, where one is at fault,
 * the tensor.
 */
export function validateModelConfig(config: ModelConfig, io: ModelIO): void {
  const fail = (message: string): never => {
    throw new InferenceServerError('INVALID_ARG', `model '${config.name}': ${message}`);
  };
  validateSanity(config, fail);
  const maxBatchSize = config.max_batch_size ?? 0;
  for (const [kind, tensors, modelTensors] of [
    ['input', config.input ?? [], io.inputs],
    ['output', config.output ?? [], io.outputs],
  ] as const) {
    for (const tensor of tensors) {
      const model = modelTensors.find((m) => m.name === tensor.name);
      if (!model) {
        fail(
          `${kind} '${tensor.name}' in the config is not an ${kind} of the model ` +
            `(model ${kind}s: ${modelTensors.map((m) => `'${m.name}'`).join(', ') || 'none'})`,
        );
      }
      validateTensor(kind, tensor, fail);
      validateAgainstModel(kind, tensor, model!, maxBatchSize, fail);
    }
  }
  // The sequence batcher feeds its control and state inputs itself.
  const configured = new Set([...(config.input ?? []).map((t) => t.name), ...sequenceTensorNames(config).inputs]);
  for (const model of io.inputs) {
    if (!model.optional && !configured.has(model.name)) {
      fail(`input '${model.name}' of the model is missing from the config (every required model input must be listed)`);
    }
  }
  validateSequenceBatching(config, io);
  // Triton's rule and words (model_config_utils.cc): the cache holds one answer a request, a decoupled model's is a stream.
  if (isDecoupled(config) && config.response_cache?.enable) {
    throw new InferenceServerError(
      'INVALID_ARG',
      `Response Cache does not currently support model ${config.name} with 'decoupled' transaction policy. Please disable the response cache.`,
    );
  }
}

/**
 * Checks a config that has no model file to check it against (an ensemble): the config
 * against itself, and every input and output declared with a datatype and dims.
 */
export function validateDeclaredConfig(config: ModelConfig): void {
  const fail = (message: string): never => {
    throw new InferenceServerError('INVALID_ARG', `model '${config.name}': ${message}`);
  };
  validateSanity(config, fail);
  if ((config.input ?? []).length === 0) fail('has no inputs: an ensemble must declare its inputs in config.pbtxt');
  if ((config.output ?? []).length === 0) fail('has no outputs: an ensemble must declare its outputs in config.pbtxt');
  for (const tensor of config.input ?? []) validateTensor('input', tensor, fail);
  for (const tensor of config.output ?? []) validateTensor('output', tensor, fail);
  validateSequenceBatching(config, undefined);
}

function validateSanity(config: ModelConfig, fail: (m: string) => never): void {
  const maxBatchSize = config.max_batch_size ?? 0;
  if (!Number.isInteger(maxBatchSize) || maxBatchSize < 0) {
    fail(`max_batch_size must be a non-negative integer, got ${maxBatchSize}`);
  }
  for (const [kind, tensors] of [
    ['input', config.input ?? []],
    ['output', config.output ?? []],
  ] as const) {
    const seen = new Set<string>();
    for (const t of tensors) {
      if (seen.has(t.name)) fail(`${kind} '${t.name}' is listed more than once`);
      seen.add(t.name);
    }
  }
  const batching = config.dynamic_batching;
  if (batching) {
    if (maxBatchSize === 0) {
      fail('dynamic_batching requires max_batch_size > 0 (a model with max_batch_size 0 cannot batch)');
    }
    for (const size of batching.preferred_batch_size ?? []) {
      if (size < 1 || size > maxBatchSize) {
        fail(`dynamic_batching.preferred_batch_size ${size} is outside 1..max_batch_size (${maxBatchSize})`);
      }
    }
    const levels = batching.priority_levels ?? 0;
    if (levels > 0) {
      const level = batching.default_priority_level ?? 0;
      if (level < 1 || level > levels) {
        fail(`dynamic_batching.default_priority_level ${level} is outside 1..priority_levels (${levels})`);
      }
    }
    for (const key of Object.keys(batching.priority_queue_policy ?? {})) {
      if (Number(key) < 1 || Number(key) > levels) {
        fail(`dynamic_batching.priority_queue_policy has priority level ${key}, outside 1..priority_levels (${levels})`);
      }
    }
  }
  (config.instance_group ?? []).forEach((group, i) => {
    if (group.count !== undefined && group.count < 1) {
      fail(`instance_group ${group.name ? `'${group.name}'` : `#${i}`} has count ${group.count}; count must be >= 1`);
    }
    validateRateLimiter(group, i, fail);
  });
}

function validateRateLimiter(group: ModelInstanceGroup, i: number, fail: (m: string) => never): void {
  if (!group.rate_limiter) return;
  const what = `instance_group ${group.name ? `'${group.name}'` : `#${i}`} rate_limiter`;
  const names = new Set<string>();
  (group.rate_limiter.resources ?? []).forEach((resource, r) => {
    if (!resource.name) fail(`${what}: resources #${r} has no name`);
    if (names.has(resource.name)) fail(`${what}: resource '${resource.name}' is listed twice`);
    names.add(resource.name);
    if (resource.count !== undefined && !(Number.isInteger(resource.count) && resource.count >= 0)) {
      fail(`${what}: resource '${resource.name}' has count ${resource.count}; count must be a whole number >= 0`);
    }
  });
  const priority = group.rate_limiter.priority;
  if (priority !== undefined && !(Number.isInteger(priority) && priority >= 0)) {
    fail(`${what}: priority ${priority} must be a whole number >= 0 (0 means 1)`);
  }
}

function validateTensor(kind: Kind, tensor: Tensor, fail: (m: string) => never): void {
  const what = `${kind} '${tensor.name}'`;
  if (!tensor.name) fail(`an ${kind} has no name`);
  if (!tensor.data_type || tensor.data_type === 'TYPE_INVALID') fail(`${what} must specify data_type`);
  if (!(tensor.data_type in CONFIG_TYPE_TO_DATATYPE)) fail(`${what} has unsupported data_type ${tensor.data_type}`);
  const dims = tensor.dims ?? [];
  if (dims.length === 0) fail(`${what} must specify dims (use dims: [ 1 ] with reshape: { shape: [ ] } for a scalar)`);
  const badDim = (d: number) => d !== WILDCARD_DIM && !(Number.isInteger(d) && d >= 1);
  if (dims.some(badDim)) fail(`${what} has dims ${formatDims(dims)}; each dim must be >= 1, or -1 for a variable size`);
  if (!tensor.reshape) return;
  const shape = tensor.reshape.shape ?? [];
  if (shape.some(badDim)) {
    fail(`${what} has reshape ${formatDims(shape)}; each dim must be >= 1, or -1 for a variable size`);
  }
  const dimsCount = elementCount(dims);
  const shapeCount = elementCount(shape);
  const compatible =
    (dimsCount === shapeCount || (shapeCount === 0 && dimsCount === 1)) &&
    (dimsCount !== -1 || fixedRuns(dims).join() === fixedRuns(shape).join());
  if (!compatible) {
    fail(`${what} has dims ${formatDims(dims)} and reshape ${formatDims(shape)} with different element counts`);
  }
}

function validateAgainstModel(kind: Kind, tensor: Tensor, model: ModelTensorInfo, maxBatchSize: number, fail: (m: string) => never): void {
  const what = `${kind} '${tensor.name}'`;
  const expected = CONFIG_TYPE_TO_DATATYPE[tensor.data_type];
  if (expected !== model.datatype) {
    fail(`${what} has data_type ${tensor.data_type} (${expected}) in the config, but the model's is ${model.datatype}`);
  }
  let modelDims = model.dims;
  if (maxBatchSize > 0) {
    if (!hasBatchDim(modelDims)) {
      fail(
        `max_batch_size is ${maxBatchSize}, but ${what} of the model has shape ${formatDims(modelDims)} whose ` +
          'first dimension is not variable (-1); batching needs a variable batch dimension: set ' +
          'max_batch_size: 0 or export the model with a dynamic first dimension',
      );
    }
    modelDims = modelDims.slice(1);
  }
  const dims = modelFacingDims(tensor);
  const source = tensor.reshape ? 'reshape' : 'dims';
  const batchNote = maxBatchSize > 0 ? ' without the batch dimension' : '';
  const matches =
    dims.length === modelDims.length && dims.every((d, i) => d === WILDCARD_DIM || modelDims[i] === WILDCARD_DIM || d === modelDims[i]);
  if (!matches) {
    fail(
      `${what} has ${source} ${formatDims(dims)} in the config, but the model's shape is ` +
        `${formatDims(model.dims)} (${formatDims(modelDims)}${batchNote})`,
    );
  }
}
