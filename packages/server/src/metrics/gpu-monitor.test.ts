import { describe, expect, it } from 'vitest';
import { parseNvidiaSmi } from './gpu-monitor.ts';

const MiB = 1024 * 1024;

describe('nvidia-smi readings', () => {
  it('parses one line per GPU into Triton gauge values', () => {
    const out = 'GPU-1a2b, 37, 2048, 15360, 41.25, 70.00\nGPU-3c4d, 0, 0, 15360, 12.5, 70.00\n';
    expect(parseNvidiaSmi(out)).toEqual([
      {
        uuid: 'GPU-1a2b',
        utilization: 0.37,
        memoryUsedBytes: 2048 * MiB,
        memoryTotalBytes: 15360 * MiB,
        powerUsageWatts: 41.25,
        powerLimitWatts: 70,
      },
      { uuid: 'GPU-3c4d', utilization: 0, memoryUsedBytes: 0, memoryTotalBytes: 15360 * MiB, powerUsageWatts: 12.5, powerLimitWatts: 70 },
    ]);
  });

  it('reads what nvidia-smi printed on a real H200 host (driver 580.159.04, recorded 2026-11-28)', () => {
    // nvidia-smi --query-gpu=uuid,utilization.gpu,memory.used,memory.total,power.draw,power.limit --format=csv,noheader,nounits
    const recorded = 'GPU-a823f094-3b90-8b85-015a-ccbb037b3d9b, 0, 0, 143771, 80.08, 700.00\n';
    expect(parseNvidiaSmi(recorded)).toEqual([
      {
        uuid: 'GPU-a823f094-3b90-8b85-015a-ccbb037b3d9b',
        utilization: 0,
        memoryUsedBytes: 0,
        memoryTotalBytes: 143771 * MiB,
        powerUsageWatts: 80.08,
        powerLimitWatts: 700,
      },
    ]);
  });

  it('keeps a GPU without power readings ([N/A]), without them', () => {
    expect(parseNvidiaSmi('GPU-1, 5, 10, 100, [N/A], [N/A]\n')).toEqual([
      {
        uuid: 'GPU-1',
        utilization: 0.05,
        memoryUsedBytes: 10 * MiB,
        memoryTotalBytes: 100 * MiB,
        powerUsageWatts: undefined,
        powerLimitWatts: undefined,
      },
    ]);
  });

  it('ignores lines it cannot read (e.g. [N/A] utilization, the older four-field answer)', () => {
    expect(parseNvidiaSmi('GPU-1, [N/A], [N/A], 100, 1, 2\n\nNo devices were found\nGPU-2, 0, 0, 100\n')).toEqual([]);
  });
});
