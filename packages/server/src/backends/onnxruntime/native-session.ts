/**
 * An ONNX Runtime session that runs synchronously, for instances on the event loop (issue 44).
 *
 * onnxruntime-node's public `InferenceSession.run` defers every run to a `setImmediate` of its own
 * and wraps it in promises and argument checks: on the event loop, where a run blocks the thread
 * anyway, that costs a loop iteration and about 10 us of CPU per run (a 16-float identity: 20 us a
 * run through the public API, 10.5 us through the binding, in a loop on these cores). The binding
 * underneath (`onnxruntime-node/dist/binding.js`, the package's own native InferenceSession, which
 * its public API calls) runs in place. It is not part of the package's documented API, so its shape
 * is checked here and a session is only made when it is as expected (onnxruntime-node is pinned;
 * native-session.test.ts fails if an upgrade changes it); otherwise callers keep the public API.
 */
import { createRequire } from 'node:module';
import type ort from 'onnxruntime-node';

/** What the binding's session takes and gives: onnxruntime-common Tensors by name. */
export type NativeFeeds = Record<string, ort.Tensor>;
export type NativeResults = Record<string, ort.Tensor>;

/** A session whose `run` returns when the run is done. */
export interface SyncSession {
  run(feeds: NativeFeeds, outputNames: readonly string[]): NativeResults;
  release(): void;
}

interface BindingSession {
  loadModel(path: string, options: ort.InferenceSession.SessionOptions): void;
  run(feeds: NativeFeeds, fetches: Record<string, null>, options: object): NativeResults;
  dispose(): void;
}

interface BindingModule {
  readonly binding: { readonly InferenceSession: new () => BindingSession };
  readonly initOrt: () => void;
}

let bindingModule: BindingModule | null | undefined;

/** The package's binding module, or null when it is not there or not of the expected shape. */
function nativeBinding(): BindingModule | null {
  if (bindingModule !== undefined) return bindingModule;
  try {
    const loaded = createRequire(import.meta.url)('onnxruntime-node/dist/binding.js') as Partial<BindingModule>;
    const Session = loaded.binding?.InferenceSession;
    const proto = Session?.prototype as Partial<BindingSession> | undefined;
    const usable =
      typeof loaded.initOrt === 'function' &&
      typeof proto?.loadModel === 'function' &&
      typeof proto.run === 'function' &&
      typeof proto.dispose === 'function';
    bindingModule = usable ? (loaded as BindingModule) : null;
  } catch {
    bindingModule = null;
  }
  return bindingModule;
}

/** Whether this onnxruntime-node has the binding a SyncSession needs. */
export function syncSessionsAvailable(): boolean {
  return nativeBinding() !== null;
}

/**
 * A synchronous session on the model file, on the CPU (`options` as ortSessionOptions makes them,
 * executionProviders ['cpu']); undefined when the binding is not as expected. Loading blocks the
 * calling thread, as the public API's does inside its setImmediate.
 */
export function createSyncSession(modelPath: string, options: ort.InferenceSession.SessionOptions): SyncSession | undefined {
  const native = nativeBinding();
  if (!native) return undefined;
  native.initOrt();
  const session = new native.binding.InferenceSession();
  session.loadModel(modelPath, options);
  return {
    run(feeds, outputNames) {
      const fetches: Record<string, null> = {};
      for (const name of outputNames) fetches[name] = null;
      return session.run(feeds, fetches, NO_RUN_OPTIONS);
    },
    release: () => session.dispose(),
  };
}

const NO_RUN_OPTIONS = Object.freeze({});
