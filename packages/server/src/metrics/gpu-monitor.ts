import { execFile } from 'node:child_process';
import type { Logger } from 'pino';
import type { ServerMetrics } from './server-metrics.ts';

export interface GpuReading {
  readonly uuid: string;
  readonly utilization: number;
  readonly memoryUsedBytes: number;
  readonly memoryTotalBytes: number;
  /** Undefined where nvidia-smi has no power reading ([N/A]: power management not supported). */
  readonly powerUsageWatts: number | undefined;
  readonly powerLimitWatts: number | undefined;
}

/**
 * power.draw is the board's draw (averaged over a second on Ampere and newer) and power.limit the
 * power management limit: NVML's power usage and management limit, which Triton reads through DCGM.
 * nvidia-smi has no energy counter (no field of --query-gpu or -q gives one, driver 580), so Triton's
 * nv_energy_consumption is not exported.
 */
const QUERY = ['--query-gpu=uuid,utilization.gpu,memory.used,memory.total,power.draw,power.limit', '--format=csv,noheader,nounits'];
const MiB = 1024 * 1024;

const watts = (field: string | undefined): number | undefined => {
  const value = field === undefined || field === '' ? NaN : Number(field);
  return Number.isFinite(value) ? value : undefined;
};

/** Parses what nvidia-smi prints for QUERY: one line per GPU. */
export function parseNvidiaSmi(output: string): GpuReading[] {
  return output
    .split('\n')
    .map((line) => line.split(',').map((f) => f.trim()))
    .filter((f) => f.length === 6 && f[0] !== '')
    .map(([uuid, utilization, used, total, draw, limit]) => ({
      uuid: uuid!,
      utilization: Number(utilization) / 100,
      memoryUsedBytes: Number(used) * MiB,
      memoryTotalBytes: Number(total) * MiB,
      powerUsageWatts: watts(draw),
      powerLimitWatts: watts(limit),
    }))
    .filter((r) => Number.isFinite(r.utilization) && Number.isFinite(r.memoryUsedBytes));
}

/**
 * Triton's GPU gauges (nv_gpu_utilization, nv_gpu_memory_used_bytes, nv_gpu_memory_total_bytes,
 * nv_gpu_power_usage, nv_gpu_power_limit) from nvidia-smi, which the NVIDIA container runtime
 * provides wherever a GPU is visible. Without it the gauges stay absent; nothing is made up.
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
        if (r.powerUsageWatts !== undefined) metrics.gpuPowerUsage.labels({ gpu_uuid: r.uuid }).set(r.powerUsageWatts);
        if (r.powerLimitWatts !== undefined) metrics.gpuPowerLimit.labels({ gpu_uuid: r.uuid }).set(r.powerLimitWatts);
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
