import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_ADAPTER } from '../gpu-check/check.ts';
import { pack, type PackedFile } from '../gpu-check/pack.ts';

/**
 * The GPU check's dry run (issue 38): packs it (smoke: Node and libonnxruntime.so.1 linked, not
 * compressed), unpacks and runs it through run.sh as the GPU host would. Without a GPU adapter it
 * must stop loudly, naming what is missing; rehearsed on the CPU, its steps run against the bundled
 * server and its workers.
 */
describe('the GPU check pack', () => {
  let dir: string;
  let files: PackedFile[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gpu-pack-'));
    files = await pack({ out: join(dir, 'pack'), smoke: true, log: () => undefined });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const runCheck = (out: string, ...args: string[]) =>
    spawnSync('bash', [join(dir, 'pack', 'run.sh'), ...args], {
      // No GPU here: nothing names a Vulkan driver either.
      env: { ...process.env, OUT: out, VK_DRIVER_FILES: '' },
      encoding: 'utf8',
      timeout: 120_000,
    });

  it('holds the bundled server, both backend workers, the check and run.sh', () => {
    const paths = files.map((f) => f.path);
    for (const path of [
      'app/server/main.js',
      'app/server/backends/onnxruntime/worker.js',
      'app/server/backends/js/worker.js',
      'app/check/check.js',
      'run.sh',
    ]) {
      expect(paths).toContain(path);
    }
    expect(paths).toContain('app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/onnxruntime_binding.node');
  });

  it('fails loudly without a GPU adapter, naming what is missing', () => {
    const out = join(dir, 'out-no-gpu');
    const run = runCheck(out, '--quick');
    expect(run.status, run.stderr).toBe(2);
    expect(run.stderr).toContain(`${NO_ADAPTER}: ONNX Runtime's WebGPU provider could not start`);
    expect(run.stderr).toMatch(/Missing: .*no Vulkan driver: no driver manifest \(ICD .json\)/);
    const report = readFileSync(join(out, 'gpu-check.md'), 'utf8');
    expect(report).toMatch(/\| GPU adapter \(WebGPU on Vulkan\) \| FAILED \|.*no GPU adapter/);
    // The run stops at the adapter: no server was started for a GPU that is not there.
    expect(report).not.toContain('(a) answers');
  });

  it('rehearsed on the CPU, serves from the bundle and runs the differential, batching and memory-limit steps', () => {
    const out = join(dir, 'out-rehearsal');
    const run = runCheck(out, '--quick', '--rehearse-on-cpu');
    const report = readFileSync(join(out, 'gpu-check.md'), 'utf8');
    expect(report, run.stderr).toMatch(/\| serve \(KIND_GPU on webgpu\) \| ok \|/);
    expect(report).toMatch(/\| \(a\) answers against ONNX Runtime CPU \| ok \|/);
    expect(report).toMatch(/\| \(d\) batching at 16 clients \| ok \|/);
    expect(report).toMatch(/\| \(e\) --model-memory-limit \| ok \|.*the second evicts it/);
    // No GPU: the nvidia-smi steps fail, and the check says so in its exit status.
    expect(run.status).toBe(1);
    expect(existsSync(join(out, 'gpu-check.md'))).toBe(true);
  });
});
