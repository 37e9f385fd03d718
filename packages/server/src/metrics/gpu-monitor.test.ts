import { describe, expect, it } from 'vitest';
import { parseNvidiaSmi } from './gpu-monitor.ts';

describe('nvidia-smi readings', () => {
  it('parses one line per GPU into Triton gauge values', () => {
    const out = 'GPU-1a2b, 37, 2048, 15360\nGPU-3c4d, 0, 0, 15360\n';
    expect(parseNvidiaSmi(out)).toEqual([
      { uuid: 'GPU-1a2b', utilization: 0.37, memoryUsedBytes: 2048 * 1024 * 1024, memoryTotalBytes: 15360 * 1024 * 1024 },
      { uuid: 'GPU-3c4d', utilization: 0, memoryUsedBytes: 0, memoryTotalBytes: 15360 * 1024 * 1024 },
    ]);
  });

  it('reads what nvidia-smi printed on a real H200 host (driver 580.159.04, recorded 2026-11-26)', () => {
    const recorded = 'GPU-5bdf6fa9-f992-629f-87f3-8aa887d25b65, 0, 0, 143771\n';
    expect(parseNvidiaSmi(recorded)).toEqual([
      { uuid: 'GPU-5bdf6fa9-f992-629f-87f3-8aa887d25b65', utilization: 0, memoryUsedBytes: 0, memoryTotalBytes: 143771 * 1024 * 1024 },
    ]);
  });

  it('ignores lines it cannot read (e.g. [N/A])', () => {
    expect(parseNvidiaSmi('GPU-1, [N/A], [N/A], 100\n\nNo devices were found\n')).toEqual([]);
  });
});
