import ort from 'onnxruntime-node';
import { probeModelBytes } from './probe-model.ts';
import { cudaUnavailableMessage } from './session-options.ts';

export interface ProviderProbe {
  readonly provider: 'cpu' | 'cuda';
  readonly usable: boolean;
  /** Why not, in plain words, when not usable. */
  readonly reason?: string;
}

/** Opens a session on the probe model with one provider and runs it once. */
export async function probeExecutionProvider(provider: 'cpu' | 'cuda', deviceId = 0): Promise<ProviderProbe> {
  try {
    const session = await ort.InferenceSession.create(probeModelBytes(), {
      executionProviders: provider === 'cuda' ? [{ name: 'cuda', deviceId }] : ['cpu'],
    });
    await session.run({ INPUT0: new ort.Tensor('float32', new Float32Array([1]), [1, 1]) });
    await session.release();
    return { provider, usable: true };
  } catch (error) {
    const message = (error as Error).message;
    return { provider, usable: false, reason: provider === 'cuda' ? cudaUnavailableMessage(message) : message };
  }
}
