import { readdirSync } from 'node:fs';

/** One GPU this process can use: its CUDA device ordinal and which host GPU it is. */
export interface VisibleGpu {
  /** What CUDA (and ONNX Runtime's `deviceId`) calls it: 0..n-1 in the process, whatever the host numbers. */
  readonly cudaOrdinal: number;
  /** The host GPU: the NVIDIA_VISIBLE_DEVICES entry (index or UUID) when that lists them, else its device file. */
  readonly hostDevice: string;
}

/**
 * The GPUs a container is given, numbered as CUDA numbers them. The NVIDIA container runtime
 * exposes the host's device files under their host names (a task that ECS gives host GPU 2 of a
 * g5.12xlarge sees only /dev/nvidia2, with NVIDIA_VISIBLE_DEVICES=2 or its UUID), while CUDA
 * numbers the devices it can see from 0: that task's GPU is CUDA device 0, and asking ONNX
 * Runtime for device 2 fails. NVIDIA_VISIBLE_DEVICES is `all` (every device file), `none` or
 * `void` (no GPU), or a comma-separated list of host indexes or UUIDs; unset outside containers.
 * Pure: the device file numbers and the variable are parameters.
 */
export function mapVisibleGpus(hostDeviceNumbers: readonly number[], nvidiaVisibleDevices: string | undefined): VisibleGpu[] {
  const files = [...hostDeviceNumbers].sort((a, b) => a - b).map((n) => `/dev/nvidia${n}`);
  const setting = nvidiaVisibleDevices?.trim();
  if (setting === undefined || setting === 'all') return files.map((hostDevice, cudaOrdinal) => ({ cudaOrdinal, hostDevice }));
  if (setting === '' || setting === 'none' || setting === 'void') return [];
  const listed = setting
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  // CUDA sees the device files the runtime mounted: never more GPUs than those.
  return listed.slice(0, files.length).map((hostDevice, cudaOrdinal) => ({ cudaOrdinal, hostDevice }));
}

/** Host numbers of the /dev/nvidiaN device files (not nvidiactl, nvidia-uvm, ...); none if the folder cannot be read. */
function nvidiaDeviceNumbers(deviceDir: string): number[] {
  try {
    return readdirSync(deviceDir)
      .map((name) => /^nvidia([0-9]+)$/.exec(name))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]));
  } catch {
    return [];
  }
}

/** The GPUs visible to this process (see mapVisibleGpus), narrowed by CUDA_VISIBLE_DEVICES. */
export function visibleGpus(
  deviceDir = '/dev',
  cudaVisibleDevices: string | undefined = process.env['CUDA_VISIBLE_DEVICES'],
  nvidiaVisibleDevices: string | undefined = process.env['NVIDIA_VISIBLE_DEVICES'],
): VisibleGpu[] {
  const gpus = mapVisibleGpus(nvidiaDeviceNumbers(deviceDir), nvidiaVisibleDevices);
  if (cudaVisibleDevices === undefined) return gpus;
  if (cudaVisibleDevices.trim() === '' || cudaVisibleDevices.trim() === '-1') return [];
  // CUDA renumbers the devices CUDA_VISIBLE_DEVICES lists (ordinals or UUIDs) from 0 again.
  return cudaVisibleDevices
    .split(',')
    .map((entry) => entry.trim())
    .slice(0, gpus.length)
    .map((entry, cudaOrdinal) => ({ cudaOrdinal, hostDevice: (/^\d+$/.test(entry) && gpus[Number(entry)]?.hostDevice) || entry }));
}

/**
 * CUDA device ordinals visible to this process, 0..n-1: what instance_group `gpus` and ONNX
 * Runtime's CUDA `deviceId` mean. The device folder and the variables are parameters so the
 * placement logic can be exercised without a GPU.
 */
export function visibleGpuIds(
  deviceDir = '/dev',
  cudaVisibleDevices: string | undefined = process.env['CUDA_VISIBLE_DEVICES'],
  nvidiaVisibleDevices: string | undefined = process.env['NVIDIA_VISIBLE_DEVICES'],
): number[] {
  return visibleGpus(deviceDir, cudaVisibleDevices, nvidiaVisibleDevices).map((gpu) => gpu.cudaOrdinal);
}
