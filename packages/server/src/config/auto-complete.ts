import { DATATYPE_TO_CONFIG_TYPE } from '../tensor/datatype.ts';
import type { ModelConfig, ModelInput, ModelOutput } from './model-config.ts';
import type { ModelIO, ModelTensorInfo } from './model-io.ts';
import { sequenceTensorNames } from './sequence-batching.ts';
import { hasBatchDim, modelFacingDims } from './shape-rules.ts';

/** Triton's --backend-config=default-max-batch-size, which auto-complete uses. */
export const DEFAULT_MAX_BATCH_SIZE = 4;

/**
 * `parameters { key: "batchwise_dynamic_batching" value: { string_value: "false" } }` keeps a
 * model that could batch unbatched (batching is on by default otherwise).
 */
export const DYNAMIC_BATCHING_PARAMETER = 'batchwise_dynamic_batching';

/**
 * Completes a config from the model file, as Triton's onnxruntime backend does with
 * --strict-model-config=false. Differences, on purpose: batching is turned on
 * (`dynamic_batching {}`) whenever the result batches, and max_batch_size is not
 * raised from 0 when the config lists a tensor with dims (or a reshape) of the model's
 * full rank (the author has written the batch dim into them, so meant no batching).
 * Pure: the input is not changed.
 */
export function autoCompleteModelConfig(config: ModelConfig | undefined, io: ModelIO, modelName: string): ModelConfig {
  const out: ModelConfig = config ? structuredClone(config) : { name: modelName, max_batch_size: 0, input: [], output: [] };
  out.name ||= modelName;
  out.backend ??= 'onnxruntime';
  out.platform ??= 'onnxruntime_onnx';
  out.input ??= [];
  out.output ??= [];
  out.max_batch_size ??= 0;

  const modelInputs = io.inputs.filter((t) => !t.optional);
  const all = [...modelInputs, ...io.outputs];
  const canBatch = all.length > 0 && all.every((t) => hasBatchDim(t.dims));
  if (out.max_batch_size === 0 && canBatch && !listsBatchDim(out, io)) {
    out.max_batch_size = DEFAULT_MAX_BATCH_SIZE;
  }
  const batched = out.max_batch_size > 0;
  // The sequence batcher's control and state tensors are the server's to feed and take, not the requests'.
  const fed = sequenceTensorNames(out);
  out.input = completeTensors(
    out.input,
    modelInputs.filter((t) => !fed.inputs.has(t.name)),
    batched,
  );
  out.output = completeTensors(
    out.output,
    io.outputs.filter((t) => !fed.outputs.has(t.name)),
    batched,
  );

  const optedOut = out.parameters?.[DYNAMIC_BATCHING_PARAMETER]?.string_value.trim().toLowerCase() === 'false';
  if (batched && !optedOut && !out.dynamic_batching && !out.sequence_batching && !out.ensemble_scheduling) {
    out.dynamic_batching = {};
  }
  return out;
}

function listsBatchDim(config: ModelConfig, io: ModelIO): boolean {
  const fullRank = (tensors: (ModelInput | ModelOutput)[], model: readonly ModelTensorInfo[]) =>
    tensors.some((t) => {
      const m = model.find((x) => x.name === t.name);
      return m !== undefined && (t.dims?.length ?? 0) > 0 && modelFacingDims(t).length === m.dims.length;
    });
  return fullRank(config.input, io.inputs) || fullRank(config.output, io.outputs);
}

function completeTensors<T extends ModelInput | ModelOutput>(listed: T[], model: readonly ModelTensorInfo[], batched: boolean): T[] {
  const result = listed.map((tensor) => {
    const m = model.find((x) => x.name === tensor.name);
    if (!m) return tensor;
    const filled = { ...tensor };
    if (!filled.data_type || filled.data_type === 'TYPE_INVALID') {
      filled.data_type = DATATYPE_TO_CONFIG_TYPE[m.datatype];
    }
    if (!filled.dims || filled.dims.length === 0) Object.assign(filled, shapeFromModel(m, batched, filled));
    return filled;
  });
  for (const m of model) {
    if (listed.some((t) => t.name === m.name)) continue;
    result.push({
      name: m.name,
      data_type: DATATYPE_TO_CONFIG_TYPE[m.datatype],
      ...shapeFromModel(m, batched, {}),
    } as T);
  }
  return result;
}

/** Dims without the batch dim; a scalar becomes dims [1] reshaped to [], as Triton writes it. */
function shapeFromModel(
  m: ModelTensorInfo,
  batched: boolean,
  tensor: { reshape?: unknown },
): { dims: number[]; reshape?: { shape: number[] } } {
  const dims = batched ? m.dims.slice(1) : [...m.dims];
  if (dims.length > 0) return { dims };
  return tensor.reshape ? { dims: [1] } : { dims: [1], reshape: { shape: [] } };
}
