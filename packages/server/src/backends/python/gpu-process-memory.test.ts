import { describe, expect, it } from 'vitest';
import { COMPUTE_APPS_QUERY, gpuBytesOfProcess, parseComputeApps, processGpuBytes } from './gpu-process-memory.ts';

const MiB = 1024 * 1024;

/** What nvidia-smi 580 prints for COMPUTE_APPS_QUERY: a stub on two GPUs, another process, one it cannot size. */
const OUTPUT = [
  '4711, GPU-8c1f0d8e-2b1e-6d3a-91b2-5f0e4e2b7a10, 1542',
  '4711, GPU-1d5e7c2a-9f04-4b61-8e3d-0a6c2f9b4e77, 314',
  '5120, GPU-8c1f0d8e-2b1e-6d3a-91b2-5f0e4e2b7a10, 20480',
  '6001, GPU-8c1f0d8e-2b1e-6d3a-91b2-5f0e4e2b7a10, [N/A]',
  '',
].join('\n');

describe('GPU memory of a process, from nvidia-smi', () => {
  it('asks nvidia-smi for each process, GPU and memory in MiB, without headers', () => {
    expect(COMPUTE_APPS_QUERY).toEqual(['--query-compute-apps=pid,gpu_uuid,used_memory', '--format=csv,noheader,nounits']);
  });

  it('parses one entry per process and GPU, leaving out what nvidia-smi cannot size', () => {
    expect(parseComputeApps(OUTPUT)).toEqual([
      { pid: 4711, gpuUuid: 'GPU-8c1f0d8e-2b1e-6d3a-91b2-5f0e4e2b7a10', usedBytes: 1542 * MiB },
      { pid: 4711, gpuUuid: 'GPU-1d5e7c2a-9f04-4b61-8e3d-0a6c2f9b4e77', usedBytes: 314 * MiB },
      { pid: 5120, gpuUuid: 'GPU-8c1f0d8e-2b1e-6d3a-91b2-5f0e4e2b7a10', usedBytes: 20480 * MiB },
    ]);
    expect(parseComputeApps('No running processes found\n')).toEqual([]);
    expect(parseComputeApps('')).toEqual([]);
  });

  it("sums a process's memory over the GPUs it holds memory on", () => {
    const apps = parseComputeApps(OUTPUT);
    expect(gpuBytesOfProcess(apps, 4711)).toBe((1542 + 314) * MiB);
    expect(gpuBytesOfProcess(apps, 5120)).toBe(20480 * MiB);
    expect(gpuBytesOfProcess(apps, 6001)).toBe(0);
  });

  it('says nothing (undefined) where nvidia-smi cannot run or does not list the process', async () => {
    expect(await processGpuBytes(undefined)).toBeUndefined();
    // This process holds no GPU memory: nvidia-smi is absent here, or does not list it.
    expect(await processGpuBytes(process.pid)).toBeUndefined();
  });
});
