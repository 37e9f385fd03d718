import { readdirSync } from 'node:fs';

/**
 * GPU device ids visible to this process: the /dev/nvidiaN device files, narrowed by
 * CUDA_VISIBLE_DEVICES (CUDA renumbers the devices it lists from 0). The device folder and the
 * variable are parameters so the placement logic can be exercised without a GPU.
 */
export function visibleGpuIds(
  deviceDir = '/dev',
  cudaVisibleDevices: string | undefined = process.env['CUDA_VISIBLE_DEVICES'],
): number[] {
  let devices: number[];
  try {
    devices = readdirSync(deviceDir)
      .map((name) => /^nvidia([0-9]+)$/.exec(name))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
  } catch {
    return [];
  }
  if (cudaVisibleDevices === undefined) return devices;
  if (cudaVisibleDevices.trim() === '' || cudaVisibleDevices.trim() === '-1') return [];
  return cudaVisibleDevices.split(',').map((_, i) => i).filter((i) => i < devices.length);
}
