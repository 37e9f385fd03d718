/** What the GPU check reads off its host: nvidia-smi, the Vulkan loader and ICD, the GPU device files. */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { glxDriverWithoutDisplay } from '@batchwise/server/backends/headless-vulkan.ts';
import { vulkanMissing, vulkanSetup } from '@batchwise/server/backends/vulkan-detect.ts';

/** A command's output, or the reason it gave none; never throws. */
export function runTool(command: string, args: readonly string[], timeoutMs = 15_000): Promise<{ ok: boolean; text: string }> {
  return new Promise((resolve) =>
    execFile(command, args, { timeout: timeoutMs, maxBuffer: 4 * 2 ** 20 }, (error, stdout, stderr) =>
      resolve(
        error
          ? { ok: false, text: `${error.message.split('\n')[0]}${stderr ? `\n${stderr}` : ''}`.trim() }
          : { ok: true, text: stdout.trim() },
      ),
    ),
  );
}

/** `nvidia-smi --query-gpu=memory.used` of the first GPU, bytes; undefined without nvidia-smi. */
export async function gpuMemoryUsedBytes(): Promise<number | undefined> {
  const r = await runTool('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits']);
  const mib = Number(r.text.split('\n')[0]);
  return r.ok && Number.isFinite(mib) ? mib * 2 ** 20 : undefined;
}

/** GPU memory of one process as nvidia-smi lists its compute apps, bytes; undefined when it is not listed. */
export async function processGpuMemoryBytes(pid: number): Promise<number | undefined> {
  const r = await runTool('nvidia-smi', ['--query-compute-apps=pid,used_memory', '--format=csv,noheader,nounits']);
  for (const line of r.ok ? r.text.split('\n') : []) {
    const [p, used] = line.split(',').map((f) => f.trim());
    if (Number(p) === pid && Number.isFinite(Number(used))) return Number(used) * 2 ** 20;
  }
  return undefined;
}

/** The processes below `pid` (children, theirs, ...) with their command lines, from /proc; none where /proc cannot tell. */
export function descendantProcesses(pid: number): { pid: number; command: string }[] {
  const found: { pid: number; command: string }[] = [];
  const visit = (parent: number) => {
    let children: number[] = [];
    try {
      for (const task of readdirSync(`/proc/${parent}/task`))
        children.push(...readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8').split(' ').filter(Boolean).map(Number));
    } catch {
      children = [];
    }
    for (const child of children) {
      let command = '';
      try {
        command = readFileSync(`/proc/${child}/cmdline`, 'utf8').split('\0').join(' ').trim();
      } catch {
        // gone meanwhile
      }
      found.push({ pid: child, command });
      visit(child);
    }
  };
  visit(pid);
  return found;
}

/**
 * What a WebGPU adapter on Vulkan needs that this host lacks, in words: the names in the message
 * the check fails with when ONNX Runtime finds no adapter.
 */
export async function missingForVulkan(): Promise<string[]> {
  const missing: string[] = [];
  let devices: string[] = [];
  try {
    devices = readdirSync('/dev').filter((f) => /^nvidia\d+$/.test(f));
  } catch {
    // no /dev to read: counted as no device below
  }
  if (devices.length === 0) missing.push('an NVIDIA GPU (no /dev/nvidia<N> device file)');
  if (!(await runTool('nvidia-smi', ['-L'])).ok) missing.push('the NVIDIA driver (nvidia-smi does not run)');
  const setup = vulkanSetup();
  const vulkan = vulkanMissing(setup);
  if (vulkan) missing.push(vulkan);
  // vulkanMissing names the loader first; the drivers may be missing as well.
  const driver = setup.loader === undefined ? vulkanMissing({ ...setup, loader: 'libvulkan.so.1' }) : undefined;
  if (driver) missing.push(driver);
  const headless = glxDriverWithoutDisplay();
  if (headless) missing.push(headless);
  return missing;
}
