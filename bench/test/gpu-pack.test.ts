import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_ADAPTER } from '../gpu-check/check.ts';
import { pack, type PackedFile } from '../gpu-check/pack.ts';

/**
 * The GPU check's dry run (issues 38 and 45): packs it (smoke: Node and libonnxruntime.so.1 linked,
 * not compressed), unpacks and runs it through run.sh as the GPU host would. Without a GPU adapter it
 * must stop loudly, naming what is missing; rehearsed on the CPU, its steps run against the bundled
 * server, its workers and its `tune` command, and the PyTorch step fails naming why (no torch here).
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
      timeout: 240_000,
    });

  it('holds the bundled server, both backend workers, the check and run.sh', () => {
    const paths = files.map((f) => f.path);
    for (const path of [
      'app/server/main.js',
      'app/server/backends/onnxruntime/worker.js',
      'app/server/backends/js/worker.js',
      'app/check/check.js',
      'app/check/torch_mlp.py',
      'app/server/stub/stub.py',
      'app/server/stub/triton_python_backend_utils.py',
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

  it('rehearsed on the CPU, serves from the bundle and runs every step that needs no GPU', { timeout: 300_000 }, () => {
    const out = join(dir, 'out-rehearsal');
    // A setting served as mlp_gpu_best whatever its time: on the CPU none is faster, and the path is the device's.
    const run = runCheck(out, '--quick', '--rehearse-on-cpu', '--serve-setting', 'max_num_pending_dispatches 256');
    const report = readFileSync(join(out, 'gpu-check.md'), 'utf8');
    expect(report, run.stderr).toMatch(/\| serve \(KIND_GPU on webgpu\) \| ok \|/);
    // The server's own `tune` command, from the bundle (its candidates' servers are the bundle too).
    expect(report).toMatch(/\| KIND_CPU config by batchwise tune \(16 clients\) \| ok \| [\d.]+ \| (recommended|nearest): cpu /);
    expect(report).toMatch(/\| \(a\) answers against ONNX Runtime CPU \| ok \|/);
    // Every session setting ran in a child of the bundled check (the CPU provider here, so all answer right).
    expect(report).toMatch(
      /\| \(g0\) WebGPU session settings[^|]*\| ok \|.*batch 1 as served [\d.]+ ms; 2x64 probe [\d.]+ ms.*failed: none/,
    );
    expect(report).not.toContain(' WRONG |');
    expect(report).toMatch(/\| \(g0\) WebGPU session settings[^|]*\| ok \|.*served as mlp_gpu_best: max_num_pending_dispatches 256/);
    expect(report).toContain('parameters { key: "max_num_pending_dispatches" value: "256" }');
    expect(report).toMatch(/\| mlp_gpu_best \| \d+ \| \d+ \| [\d.]+ \| [\d.]+ \| 0 \|/);
    expect(report).toMatch(/\| \(d\) batching at 16 clients \| ok \|/);
    expect(report).toMatch(
      /\| \(f\) WebGPU against the host's CPU \(16 clients; batch 1\) \| ok \|.*throughput x[\d.]+, target >= x3 .*one execution at batch 1 [\d.]+ ms/,
    );
    expect(report).toMatch(
      /\| per-execution time \(server statistics\): MLPs \| ok \| [\d.]+ \| mlp_gpu at batch 1: [\d.]+ ms compute_infer/,
    );
    expect(report).toMatch(/\| \(g\) ONNX Runtime profile of one CPU \(rehearsal\) execution \| ok \|.*nodes 4 on CPU/);
    expect(existsSync(join(out, 'gpu-check-ort-profile.json'))).toBe(true);
    // No torch here: the step says so, and the check goes on.
    expect(report).toMatch(
      /\| \(h\) PyTorch on CUDA through the Python backend \| FAILED \|.*no python3 here has torch with CUDA.*No module named 'torch'/,
    );
    // The third-party models come with the pack only where `pnpm gpu:pack` fetched them once (.cache/gpu-pack).
    expect(report).toMatch(
      files.some((f) => f.path === 'app/third-party/models.json')
        ? /\| \(i\) third-party ONNX models, KIND_GPU and KIND_CPU \| ok \|.*all answers within the tolerance/
        : /\| \(i\) third-party ONNX models, KIND_GPU and KIND_CPU \| FAILED \|.*no third-party model in the pack/,
    );
    expect(report).toMatch(/\| \(e\) --model-memory-limit \| ok \|.*the second evicts it/);
    expect(report).toMatch(
      /\| \(j\) side by side: 16 clients and one execution at batch 1 \| ok \|.*mlp_gpu(_2|_4|_best)? \d+ req\/s, mlp_cpu \d+ req\/s/,
    );
    // No GPU: the nvidia-smi steps fail, and the check says so in its exit status.
    expect(run.status).toBe(1);
  });
});
