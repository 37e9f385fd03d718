import { readdirSync } from 'node:fs';

/** GPU device ids visible to this process (/dev/nvidiaN), honouring CUDA_VISIBLE_DEVICES. */
export function visibleGpuIds(): number[] {
  let devices: number[];
  try {
    devices = readdirSync('/dev')
      .map((name) => /^nvidia([0-9]+)$/.exec(name))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
  } catch {
    return [];
  }
  const visible = process.env['CUDA_VISIBLE_DEVICES'];
  if (visible === undefined) return devices;
  if (visible.trim() === '' || visible.trim() === '-1') return [];
  return visible.split(',').map((_, i) => i).filter((i) => i < devices.length);
}
