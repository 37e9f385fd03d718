import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mapVisibleGpus, visibleGpuIds, visibleGpus } from './gpu-detect.ts';

describe('GPU device mapping', () => {
  it('numbers the GPU ECS gives a task from 0, whatever its host number (index or UUID)', () => {
    // Task placed on host GPU 2 of a g5.12xlarge: only /dev/nvidia2 is mounted.
    expect(mapVisibleGpus([2], '2')).toEqual([{ cudaOrdinal: 0, hostDevice: '2' }]);
    expect(mapVisibleGpus([3], 'GPU-8e1f52b6-0f3c-4c1d-9a7e-2b1f0c9d4e11')).toEqual([
      { cudaOrdinal: 0, hostDevice: 'GPU-8e1f52b6-0f3c-4c1d-9a7e-2b1f0c9d4e11' },
    ]);
  });

  it('maps several host GPUs to CUDA ordinals 0..n-1', () => {
    expect(mapVisibleGpus([3, 1], '1,3')).toEqual([
      { cudaOrdinal: 0, hostDevice: '1' },
      { cudaOrdinal: 1, hostDevice: '3' },
    ]);
    expect(mapVisibleGpus([5, 6], 'GPU-a, GPU-b')).toEqual([
      { cudaOrdinal: 0, hostDevice: 'GPU-a' },
      { cudaOrdinal: 1, hostDevice: 'GPU-b' },
    ]);
  });

  it('uses the device files for `all` and outside a container, and none for none/void/empty', () => {
    expect(mapVisibleGpus([2, 0, 1], 'all').map((g) => [g.cudaOrdinal, g.hostDevice])).toEqual([
      [0, '/dev/nvidia0'],
      [1, '/dev/nvidia1'],
      [2, '/dev/nvidia2'],
    ]);
    expect(mapVisibleGpus([4], undefined)).toEqual([{ cudaOrdinal: 0, hostDevice: '/dev/nvidia4' }]);
    for (const none of ['none', 'void', '', ' ']) expect(mapVisibleGpus([0], none)).toEqual([]);
  });

  it('never counts more GPUs than device files are mounted', () => {
    expect(mapVisibleGpus([], '0,1')).toEqual([]);
    expect(mapVisibleGpus([7], '6,7')).toEqual([{ cudaOrdinal: 0, hostDevice: '6' }]);
  });

  it('reads the device folder and narrows by CUDA_VISIBLE_DEVICES, renumbering again', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'batchwise-dev-'));
    try {
      for (const name of ['nvidia2', 'nvidia3', 'nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools']) await writeFile(join(dir, name), '');
      expect(visibleGpuIds(dir, undefined, 'GPU-x,GPU-y')).toEqual([0, 1]);
      expect(visibleGpuIds(dir, undefined, undefined)).toEqual([0, 1]);
      expect(visibleGpus(dir, '1', 'GPU-x,GPU-y')).toEqual([{ cudaOrdinal: 0, hostDevice: 'GPU-y' }]);
      expect(visibleGpuIds(dir, '-1', undefined)).toEqual([]);
      expect(visibleGpuIds(join(dir, 'missing'), undefined, '0')).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
