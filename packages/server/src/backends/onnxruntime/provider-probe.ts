import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import ort from 'onnxruntime-node';
import { probeModelBytes } from './probe-model.ts';
import { cudaUnavailableMessage } from './session-options.ts';

export interface ProviderProbe {
  readonly provider: 'cpu' | 'cuda';
  readonly usable: boolean;
  /** Why not, in plain words, when not usable. */
  readonly reason?: string;
}

/** The libraries ONNX Runtime loads for the CUDA execution provider, beside its Node binding. */
const CUDA_PROVIDER_LIBRARIES = ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'];

/**
 * Opens a session on the probe model with one provider and runs it once. For `batchwise doctor`,
 * whose table says why a provider is unusable: ONNX Runtime's own log is kept to fatal errors in
 * this process, or a missing CUDA provider prints its raw C++ error (in red, naming the library)
 * on stderr before the table. ORT reads that level once, when its first session is created: the
 * probe is the first in doctor's process, and the server never runs it.
 */
export async function probeExecutionProvider(provider: 'cpu' | 'cuda', deviceId = 0): Promise<ProviderProbe> {
  ort.env.logLevel = 'fatal';
  try {
    const session = await ort.InferenceSession.create(probeModelBytes(), {
      executionProviders: provider === 'cuda' ? [{ name: 'cuda', deviceId }] : ['cpu'],
    });
    await session.run({ INPUT0: new ort.Tensor('float32', new Float32Array([1]), [1, 1]) });
    await session.release();
    return { provider, usable: true };
  } catch (error) {
    const message = (error as Error).message;
    return { provider, usable: false, reason: provider === 'cuda' ? cudaUnavailableMessage(withMissingLibraries(message)) : message };
  }
}

/**
 * ORT's exception says only "Failed to load shared library"; the library it could not open went
 * to its log. Name the provider libraries missing beside the binding, in words, instead.
 */
function withMissingLibraries(message: string): string {
  if (!/failed to load shared library/i.test(message)) return message;
  let bindingDir: string;
  try {
    const entry = createRequire(import.meta.url).resolve('onnxruntime-node');
    bindingDir = join(dirname(entry), '..', 'bin', 'napi-v6', process.platform, process.arch);
  } catch {
    return message;
  }
  const missing = CUDA_PROVIDER_LIBRARIES.filter((library) => !existsSync(join(bindingDir, library)));
  if (missing.length === 0) return message;
  return `${message} (onnxruntime-node was installed without its CUDA provider: ${bindingDir} has no ${missing.join(' or ')})`;
}
