import ort from 'onnxruntime-node';
import type { GpuProviderName } from '../../config/execution-accelerators.ts';
import { probeModelBytes } from './probe-model.ts';
import { gpuUnavailableMessage } from './provider-failure.ts';
import { ortSessionOptions } from './session-options.ts';

export interface ProviderProbe {
  readonly provider: GpuProviderName | 'cpu';
  readonly usable: boolean;
  /** Why not, in plain words, when not usable. */
  readonly reason?: string;
}

/**
 * Opens a session on the probe model with one provider, as a KIND_GPU instance asking for it
 * alone would, and runs it once. For `batchwise doctor`, whose table says why a provider is
 * unusable: ONNX Runtime's own log is kept to fatal errors in this process, or a missing CUDA
 * provider prints its raw C++ error (in red, naming the library) on stderr before the table. ORT
 * reads that level once, when its first session is created: the probe is the first in doctor's
 * process, and the server never runs it.
 */
export async function probeExecutionProvider(provider: GpuProviderName | 'cpu', deviceId = 0): Promise<ProviderProbe> {
  ort.env.logLevel = 'fatal';
  const options =
    provider === 'cpu'
      ? ortSessionOptions({}, 'cpu', 0)
      : ortSessionOptions({ gpuProviders: [{ name: provider, options: {}, sources: {} }] }, 'gpu', deviceId);
  try {
    const session = await ort.InferenceSession.create(probeModelBytes(), options);
    await session.run({ INPUT0: new ort.Tensor('float32', new Float32Array([1]), [1, 1]) });
    await session.release();
    return { provider, usable: true };
  } catch (error) {
    const message = (error as Error).message;
    return { provider, usable: false, reason: provider === 'cpu' ? message : gpuUnavailableMessage(provider, message) };
  }
}
