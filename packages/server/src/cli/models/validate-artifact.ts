import { readFile } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import { datatypeOfOrtType } from '../../backends/onnxruntime/ort-types.ts';
import { autoCompleteModelConfig, normalizeModelConfig, validateModelConfig } from '../../config/index.ts';
import type { ModelConfig } from '../../config/model-config.ts';
import type { ModelIO, ModelTensorInfo } from '../../config/model-io.ts';

export class ArtifactRejectedError extends Error {
  override readonly name = 'ArtifactRejectedError';
}

/**
 * Loads the artifact in ONNX Runtime (CPU, in this process) and checks its inputs and
 * outputs against the model's config as the server will when it loads the version: names,
 * datatypes, dims and batching. Throws ArtifactRejectedError saying why.
 */
export async function validateArtifact(file: string, config: ModelConfig, modelName: string): Promise<ModelIO> {
  const bytes = await readFile(file).catch((error: NodeJS.ErrnoException) => {
    throw new ArtifactRejectedError(`cannot read artifact ${file}: ${error.message}`);
  });
  if (bytes.length === 0) throw new ArtifactRejectedError(`artifact ${file} is empty`);
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(bytes, { executionProviders: ['cpu'], graphOptimizationLevel: 'disabled' });
  } catch (error) {
    throw new ArtifactRejectedError(`artifact ${file} is not a loadable ONNX model (truncated or corrupt?): ${(error as Error).message}`);
  }
  let io: ModelIO;
  try {
    io = { inputs: session.inputMetadata.map(tensorInfo), outputs: session.outputMetadata.map(tensorInfo) };
  } catch (error) {
    throw new ArtifactRejectedError(`artifact ${file}: ${(error as Error).message}`);
  } finally {
    await session.release().catch(() => undefined);
  }
  try {
    const completed = autoCompleteModelConfig(config, io, modelName);
    validateModelConfig(normalizeModelConfig(completed, { visibleGpuIds: [0] }), io);
  } catch (error) {
    throw new ArtifactRejectedError(`artifact ${file} does not match the config of '${modelName}': ${(error as Error).message}`);
  }
  return io;
}

function tensorInfo(meta: ort.InferenceSession.ValueMetadata): ModelTensorInfo {
  if (!meta.isTensor) throw new Error(`'${meta.name}' is not a tensor; only tensor inputs and outputs are supported`);
  const datatype = datatypeOfOrtType(meta.type);
  if (datatype === undefined) throw new Error(`tensor '${meta.name}' has unsupported type ${meta.type}`);
  return { name: meta.name, datatype, dims: meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) };
}
