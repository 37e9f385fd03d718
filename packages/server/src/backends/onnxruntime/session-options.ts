import type { InferenceSession } from 'onnxruntime-node';
import type { SessionSettings } from '../backend.ts';

/** onnxruntime-node session options from backend-neutral settings and the chosen device. */
export function ortSessionOptions(settings: SessionSettings, device: 'cpu' | 'cuda', deviceId: number): InferenceSession.SessionOptions {
  const providers: InferenceSession.ExecutionProviderConfig[] = device === 'cuda' ? [{ name: 'cuda', deviceId }] : ['cpu'];
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
    extra: configEntriesAsExtra({ ...SERVER_SESSION_CONFIG_DEFAULTS, ...settings.sessionConfigEntries }),
  };
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

export const PROVIDER_NAME = { cpu: 'CPUExecutionProvider', cuda: 'CUDAExecutionProvider' } as const;

/** The message a KIND_GPU model fails to load with when CUDA cannot be used. */
export function cudaUnavailableMessage(reason: string): string {
  return (
    `KIND_GPU requires the CUDA execution provider, which could not be used: ${firstLine(reason)}. ` +
    'Run on a host with an NVIDIA GPU and onnxruntime-node installed with its CUDA libraries ' +
    '(ONNXRUNTIME_NODE_INSTALL=cuda12), or set instance_group kind: KIND_CPU, or start with ' +
    '--allow-cpu-fallback to run it on the CPU knowingly'
  );
}

function firstLine(text: string): string {
  // ORT appends ANSI-coloured log lines to its messages; keep the readable part.
  const clean = text.replace(/\u001b\[[0-9;]*m/g, '');
  const libraryError = /Failed to load library [^\n]*/.exec(clean);
  return (libraryError?.[0] ?? clean.split('\n')[0] ?? clean).trim();
}
