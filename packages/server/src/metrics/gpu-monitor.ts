import { execFile } from 'node:child_process';
import type { Logger } from 'pino';
import type { ServerMetrics } from './server-metrics.ts';

export interface GpuReading {
  readonly uuid: string;
  readonly utilization: number;
  readonly memoryUsedBytes: number;
  readonly memoryTotalBytes: number;
}

const QUERY = ['--query-gpu=uuid,utilization.gpu,memory.used,memory.total', '--format=csv,noheader,nounits'];
const MiB = 1024 * 1024;

/** Parses `nvidia-smi --query-gpu=uuid,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits`. */
export function parseNvidiaSmi(output: string): GpuReading[] {
  return output
    .split('\n')
    .map((line) => line.split(',').map((f) => f.trim()))
    .filter((f) => f.length === 4 && f[0] !== '')
    .map(([uuid, utilization, used, total]) => ({
      uuid: uuid!,
      utilization: Number(utilization) / 100,
      memoryUsedBytes: Number(used) * MiB,
      memoryTotalBytes: Number(total) * MiB,
    }))
    .filter((r) => Number.isFinite(r.utilization) && Number.isFinite(r.memoryUsedBytes));
}

/**
 * Triton's GPU gauges (nv_gpu_utilization, nv_gpu_memory_used_bytes, nv_gpu_memory_total_bytes)
 * from nvidia-smi, which the NVIDIA container runtime provides wherever a GPU is visible.
 * Without it the gauges stay absent; nothing is made up.
 */
export function startGpuMonitor(metrics: ServerMetrics, logger: Logger, intervalMs: number): () => void {
  let stopped = false;
  let warned = false;
  const poll = () =>
    execFile('nvidia-smi', QUERY, { timeout: 4000 }, (error, stdout) => {
      if (stopped) return;
      if (error) {
        if (!warned) logger.info({ err: error.message }, 'nvidia-smi unavailable: GPU metrics are not exported');
        warned = true;
        return;
      }
      for (const r of parseNvidiaSmi(stdout)) {
        metrics.gpuUtilization.labels({ gpu_uuid: r.uuid }).set(r.utilization);
        metrics.gpuMemoryUsedBytes.labels({ gpu_uuid: r.uuid }).set(r.memoryUsedBytes);
        metrics.gpuMemoryTotalBytes.labels({ gpu_uuid: r.uuid }).set(r.memoryTotalBytes);
      }
    });
  poll();
  const timer = setInterval(poll, intervalMs);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
