import type { InferenceSession } from 'onnxruntime-node';
import { WEBGPU_CONFIG_ENTRY_PREFIX, type GpuProvider, type GpuProviderName } from '../../config/execution-accelerators.ts';
import { DEFAULT_GPU_PROVIDERS, type InstanceDevice, type SessionSettings } from '../backend.ts';

/** onnxruntime-node session options from backend-neutral settings and the chosen device. */
export function ortSessionOptions(settings: SessionSettings, device: InstanceDevice, deviceId: number): InferenceSession.SessionOptions {
  const providers = device === 'gpu' ? providersOf(settings).map((p) => ortProvider(p, deviceId)) : ['cpu'];
  return {
    executionProviders: providers,
    ...(settings.intraOpThreads !== undefined && { intraOpNumThreads: settings.intraOpThreads }),
    ...(settings.interOpThreads !== undefined && { interOpNumThreads: settings.interOpThreads }),
    ...(settings.executionMode !== undefined && { executionMode: settings.executionMode }),
    ...(settings.graphOptimizationLevel !== undefined && {
      graphOptimizationLevel: settings.graphOptimizationLevel,
    }),
    ...(settings.enableCpuMemArena !== undefined && { enableCpuMemArena: settings.enableCpuMemArena }),
    ...(settings.enableMemPattern !== undefined && { enableMemPattern: settings.enableMemPattern }),
    extra: configEntriesAsExtra({
      ...SERVER_SESSION_CONFIG_DEFAULTS,
      ...settings.sessionConfigEntries,
      ...(device === 'gpu' && providerConfigEntries(settings)),
    }),
  };
}

/** The session config entries a provider's options set (WebGPU's `ep.webgpuexecutionprovider.*`). */
function providerConfigEntries(settings: SessionSettings): Record<string, string> {
  const entries: Record<string, string> = {};
  for (const provider of providersOf(settings)) {
    if (provider.name !== 'webgpu') continue;
    for (const [key, value] of Object.entries(provider.options)) if (key.startsWith(WEBGPU_CONFIG_ENTRY_PREFIX)) entries[key] = value;
  }
  return entries;
}

/**
 * Session config entries the server sets unless a model's parameters set them. ONNX Runtime's
 * intra-op threads spin while they wait for work, which pays on a machine of their own: here they
 * share the cores with the event loop, the other instances and often the client, and a thread that
 * spins while the partner it waits for was descheduled burns a core for nothing (measured on 2
 * cores: the same throughput for 12-30% less CPU, and a lower p99, with spinning off).
 */
export const SERVER_SESSION_CONFIG_DEFAULTS: Readonly<Record<string, string>> = {
  'session.intra_op.allow_spinning': '0',
  'session.inter_op.allow_spinning': '0',
};

/**
 * onnxruntime-node takes session config entries as `extra`, an object whose nesting spells the
 * key: { session: { intra_op: { allow_spinning: '0' } } } is `session.intra_op.allow_spinning`.
 */
function configEntriesAsExtra(entries: Readonly<Record<string, string>>): Record<string, unknown> {
  const extra: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(entries)) {
    const parts = key.split('.');
    let node = extra;
    for (const part of parts.slice(0, -1)) {
      const next = (node[part] ??= {});
      if (typeof next !== 'object') throw new Error(`session config entry '${key}' nests under '${part}', which is an entry itself`);
      node = next as Record<string, unknown>;
    }
    if (typeof node[parts.at(-1)!] === 'object') throw new Error(`session config entry '${key}' is a prefix of another entry`);
    node[parts.at(-1)!] = value;
  }
  return extra;
}

/** ONNX Runtime's names of the providers, as a session reports them. */
export const PROVIDER_NAME: Readonly<Record<GpuProviderName | 'cpu', string>> = {
  cpu: 'CPUExecutionProvider',
  cuda: 'CUDAExecutionProvider',
  tensorrt: 'TensorrtExecutionProvider',
  webgpu: 'WebGpuExecutionProvider',
};

/** What a session of this device runs on, in ONNX Runtime's names: `TensorrtExecutionProvider,CUDAExecutionProvider`. */
export function providerNames(settings: SessionSettings, device: InstanceDevice): string {
  return device === 'gpu'
    ? providersOf(settings)
        .map((p) => PROVIDER_NAME[p.name])
        .join(',')
    : PROVIDER_NAME.cpu;
}

/**
 * Which of a session's GPU providers ONNX Runtime could not create, from its error: it names the
 * provider it failed to append (`OrtSessionOptionsAppendExecutionProvider_TensorRT: ...`), and
 * WebGPU fails for want of an adapter.
 */
export function failedProvider(settings: SessionSettings, ortMessage: string): GpuProviderName {
  const providers = providersOf(settings).map((p) => p.name);
  const named = providers.find((name) => (name === 'webgpu' ? /webgpu/i : name === 'cuda' ? /cuda/i : /tensorrt/i).test(ortMessage));
  return named ?? providers[0]!;
}

function providersOf(settings: SessionSettings): readonly GpuProvider[] {
  return settings.gpuProviders ?? DEFAULT_GPU_PROVIDERS;
}

/**
 * One provider as onnxruntime-node 1.30 takes it (js/node/src/session_options_helper.cc): CUDA and
 * TensorRT get the device id and nothing else (see unappliedProviderOptions); WebGPU gets its
 * options and no device (Dawn picks the adapter: model-loader allows it GPU 0 only).
 */
function ortProvider(provider: GpuProvider, deviceId: number): InferenceSession.ExecutionProviderConfig {
  if (provider.name !== 'webgpu') return { name: provider.name, deviceId };
  const options: Record<string, string | boolean | string[]> = {};
  for (const [key, value] of Object.entries(provider.options)) {
    if (key.startsWith(WEBGPU_CONFIG_ENTRY_PREFIX)) continue;
    if (key === 'enableRobustness') options[key] = value === '1';
    else if (key === 'forceCpuNodeNames')
      options[key] = value
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name !== '');
    else options[key] = value;
  }
  return { name: 'webgpu', ...options };
}

/**
 * The provider options a config sets that onnxruntime-node 1.30 cannot pass on: its binding
 * gives the CUDA and TensorRT providers only a device id. By the config parameter that set each,
 * in words, for the model's metadata and a warning at load.
 */
export function unappliedProviderOptions(settings: SessionSettings): Record<string, string> {
  const unapplied: Record<string, string> = {};
  for (const provider of providersOf(settings)) {
    if (provider.name === 'webgpu') continue;
    for (const [option, value] of Object.entries(provider.options)) {
      const source = provider.sources[option] ?? option;
      unapplied[source] =
        `${option}=${value} not applied: onnxruntime-node 1.30 passes only the device id to the ` +
        `${provider.name === 'cuda' ? 'CUDA' : 'TensorRT'} execution provider`;
    }
  }
  return unapplied;
}
