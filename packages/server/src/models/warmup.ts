import { randomFillSync } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileErrorText, resolveInModelFolder } from '../repository/model-paths.ts';
import type { ExecutionTimings, ModelInstance } from '../backends/backend.ts';
import type { WarmupRun } from '../scheduler/index.ts';
import type { ModelConfig, ModelWarmup, ModelWarmupInput } from '../config/model-config.ts';
import { CONFIG_TYPE_TO_DATATYPE, ELEMENT_BYTE_SIZE } from '../tensor/datatype.ts';
import { elementCount } from '../tensor/shape.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { Errors } from '../errors/errors.ts';
import { reshapedShape } from '../tensor/reshape.ts';

/**
 * Runs config.pbtxt's `model_warmup` samples on every instance before the version is
 * declared ready (Triton semantics: zero, random or file data; batch_size; count). Returns how
 * long each run took (for the latency objective's run-time profile: scheduler/run-time-profile.ts).
 */
export async function warmUp(
  config: ModelConfig,
  modelDir: string,
  instances: readonly ModelInstance[],
  outputNames: readonly string[],
): Promise<WarmupRun[]> {
  const runs: WarmupRun[] = [];
  for (const sample of config.model_warmup ?? []) {
    const count = Math.max(1, sample.count ?? 1);
    const batchSize = config.max_batch_size > 0 ? Math.max(1, sample.batch_size ?? 1) : 1;
    for (const [instance, model] of instances.entries()) {
      for (let i = 0; i < count; i++) {
        const inputs = await sampleInputs(config, modelDir, sample);
        const startedNs = process.hrtime.bigint();
        let timings: ExecutionTimings;
        try {
          ({ timings } = await model.execute(inputs, outputNames));
        } catch (error) {
          throw Errors.invalidArg(`model '${config.name}': warmup sample '${sample.name}' failed: ${(error as Error).message}`);
        }
        const computeNs = timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs;
        runs.push({ instance, batchSize, ns: Number(process.hrtime.bigint() - startedNs), computeNs });
      }
    }
  }
  return runs;
}

/** Samples are written with the config dims, as a request sends them, and reshaped as requests are. */
async function sampleInputs(config: ModelConfig, modelDir: string, sample: ModelWarmup): Promise<Tensor[]> {
  const batching = config.max_batch_size > 0;
  const batch = batching ? [Math.max(1, sample.batch_size ?? 1)] : [];
  return Promise.all(
    Object.entries(sample.inputs ?? {}).map(async ([name, input]) => {
      const datatype = CONFIG_TYPE_TO_DATATYPE[input.data_type];
      if (!datatype) throw Errors.invalidArg(`model '${config.name}': warmup input '${name}' has unknown data_type ${input.data_type}`);
      const shape = [...batch, ...input.dims];
      const data = await sampleData(config.name, modelDir, name, datatype, shape, input);
      const spec = config.input.find((i) => i.name === name);
      return { name, datatype, shape: [...reshapedShape(shape, spec?.dims ?? [], spec?.reshape?.shape, batching)], data };
    }),
  );
}

async function sampleData(
  model: string,
  modelDir: string,
  name: string,
  datatype: keyof typeof ELEMENT_BYTE_SIZE,
  shape: number[],
  input: ModelWarmupInput,
): Promise<Uint8Array> {
  const count = elementCount(shape);
  if (input.input_data_file) {
    // Triton reads warmup files from <model>/warmup/; the file holds one sample, repeated per batch.
    const what = `model '${model}': input_data_file of warmup input '${name}'`;
    const path = await resolveInModelFolder(modelDir, 'warmup', input.input_data_file, what);
    const file = new Uint8Array(
      await readFile(path).catch((error: unknown) => {
        throw Errors.invalidArg(`${what}: cannot read '${input.input_data_file}': ${fileErrorText(error)}`);
      }),
    );
    const batches = shape.length > input.dims.length ? shape[0]! : 1;
    const data = new Uint8Array(file.byteLength * batches);
    for (let b = 0; b < batches; b++) data.set(file, b * file.byteLength);
    return data;
  }
  if (!input.zero_data && !input.random_data) {
    throw Errors.invalidArg(`model '${model}': warmup input '${name}' needs zero_data, random_data or input_data_file`);
  }
  if (datatype === 'BYTES') {
    // Each element a 4-byte length prefix; zero data = empty strings, random = one random byte each.
    const size = input.random_data ? 5 : 4;
    const data = new Uint8Array(count * size);
    const view = new DataView(data.buffer);
    for (let i = 0; i < count; i++) {
      view.setUint32(i * size, size - 4, true);
      if (size === 5) data[i * size + 4] = 0x61 + (i % 26);
    }
    return data;
  }
  const bytes = new Uint8Array(count * ELEMENT_BYTE_SIZE[datatype]);
  if (!input.random_data) return bytes;
  if (datatype === 'FP32') new Float32Array(bytes.buffer).forEach((_, i, a) => (a[i] = Math.random()));
  else if (datatype === 'FP64') new Float64Array(bytes.buffer).forEach((_, i, a) => (a[i] = Math.random()));
  else if (datatype === 'FP16' || datatype === 'BF16') new Uint16Array(bytes.buffer).forEach((_, i, a) => (a[i] = 0x3800));
  else if (datatype === 'BOOL') bytes.forEach((_, i, a) => (a[i] = Math.random() < 0.5 ? 0 : 1));
  else randomFillSync(bytes);
  return bytes;
}
