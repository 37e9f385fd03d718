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
  };
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
