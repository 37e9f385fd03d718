import { execFile } from 'node:child_process';

/** nvidia-smi's list of the processes holding GPU memory: one line per process and GPU. */
export const COMPUTE_APPS_QUERY = ['--query-compute-apps=pid,gpu_uuid,used_memory', '--format=csv,noheader,nounits'];

const MiB = 1024 * 1024;

/** GPU memory one process holds on one GPU. */
export interface ProcessGpuMemory {
  readonly pid: number;
  readonly gpuUuid: string;
  readonly usedBytes: number;
}

/**
 * Parses what nvidia-smi prints for COMPUTE_APPS_QUERY (`1234, GPU-8c1f..., 5120`, MiB). Lines whose
 * memory nvidia-smi cannot tell (`[N/A]`, a process of another PID namespace) or that are not such
 * lines (`No running processes found`) are left out.
 */
export function parseComputeApps(output: string): ProcessGpuMemory[] {
  const apps: ProcessGpuMemory[] = [];
  for (const line of output.split('\n')) {
    const fields = line.split(',').map((f) => f.trim());
    if (fields.length !== 3) continue;
    const [pidText, gpuUuid, usedText] = fields as [string, string, string];
    if (!/^\d+$/.test(pidText) || !/^\d+$/.test(usedText) || gpuUuid === '') continue;
    apps.push({ pid: Number(pidText), gpuUuid, usedBytes: Number(usedText) * MiB });
  }
  return apps;
}

/** The GPU memory `pid` holds on every GPU together, bytes (0 when it holds none). */
export function gpuBytesOfProcess(apps: readonly ProcessGpuMemory[], pid: number): number {
  let bytes = 0;
  for (const app of apps) if (app.pid === pid) bytes += app.usedBytes;
  return bytes;
}

/**
 * The GPU memory a process holds, as nvidia-smi reports it, bytes; undefined where nvidia-smi cannot
 * run (no NVIDIA driver) or cannot see the process. Inside a container without the host's PID
 * namespace nvidia-smi lists no processes: undefined there too, never a made-up figure.
 */
export function processGpuBytes(pid: number | undefined, timeoutMs = 4000): Promise<number | undefined> {
  if (pid === undefined) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    execFile('nvidia-smi', COMPUTE_APPS_QUERY, { timeout: timeoutMs }, (error, stdout) => {
      if (error) {
        resolve(undefined);
        return;
      }
      const apps = parseComputeApps(stdout);
      resolve(apps.some((a) => a.pid === pid) ? gpuBytesOfProcess(apps, pid) : undefined);
    });
  });
}
