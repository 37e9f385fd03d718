import type { InferenceSession } from 'onnxruntime-node';
import { sessionSettingsFromConfig } from '../src/backends/session-settings.ts';
import { ortSessionOptions } from '../src/backends/onnxruntime/session-options.ts';
import { normalizeModelConfig, parseModelConfig } from '../src/config/index.ts';

/**
 * The ONNX Runtime session options a KIND_CPU instance of the model gets from the server, for
 * the config.pbtxt text given: bench/'s in-process reference runs the same model with the same
 * options (threads, `session.*` config entries and the server's own defaults for them).
 */
export function cpuSessionOptions(configText: string): InferenceSession.SessionOptions {
  return ortSessionOptions(sessionSettingsFromConfig(normalizeModelConfig(parseModelConfig(configText), { visibleGpuIds: [] })), 'cpu', 0);
}
