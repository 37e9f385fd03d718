import { describe, expect, it } from 'vitest';
import { visibleGpuIds } from '../backends/gpu-detect.ts';
import { probeExecutionProvider } from '../backends/onnxruntime/provider-probe.ts';
import { vulkanMissing, vulkanSetup } from '../backends/vulkan-detect.ts';
import { probeHostPython } from '../backends/python/host-python.ts';
import { runDoctor } from './doctor.ts';

const webgpuUsable = (await probeExecutionProvider('webgpu')).usable;
const tensorrtUsable = (await probeExecutionProvider('tensorrt')).usable;

/** No server answers here (port 1 is privileged): another test's server on the default :8002 must not change these checks. */
const NO_SERVER = 'http://127.0.0.1:1/metrics';

describe('batchwise doctor', () => {
  it.skipIf(visibleGpuIds().length > 0)('fails plainly when a GPU is expected and none is usable', async () => {
    const checks = await runDoctor({ expectGpu: true, amiFamily: 'al2023', json: false }, NO_SERVER);
    const failed = checks.filter((c) => c.required && !c.ok).map((c) => c.name);
    expect(failed).toEqual(['gpu-visible', 'cuda-execution-provider']);
    expect(checks.find((c) => c.name === 'cuda-execution-provider')?.detail).toMatch(/ONNXRUNTIME_NODE_INSTALL=cuda12/);
  });

  it.skipIf(webgpuUsable)('reports CUDA, TensorRT and a Vulkan adapter apart, each with what is missing', async () => {
    const checks = await runDoctor({ expectGpu: false, expectWebgpu: true, amiFamily: 'al2023', json: false }, NO_SERVER);
    expect(checks.filter((c) => c.required && !c.ok).map((c) => c.name)).toEqual(['webgpu-vulkan-adapter']);
    const webgpu = checks.find((c) => c.name === 'webgpu-vulkan-adapter')!;
    expect(webgpu.detail).toMatch(/requires a Vulkan GPU adapter/);
    expect(webgpu.detail).toContain(vulkanMissing(vulkanSetup()) ?? 'gave no adapter WebGPU supports');
    if (!tensorrtUsable) {
      expect(checks.find((c) => c.name === 'tensorrt-execution-provider')).toMatchObject({ ok: false, required: false });
      expect(checks.find((c) => c.name === 'tensorrt-execution-provider')!.detail).toMatch(
        /TensorRT execution provider, which could not be used/,
      );
    }
    expect(checks.find((c) => c.name === 'cuda-execution-provider')).toMatchObject({ required: false });
  });

  it('passes on a CPU host when no GPU is expected, and checks the memory budget', async () => {
    const checks = await runDoctor({ expectGpu: false, amiFamily: 'al2023', json: false }, NO_SERVER);
    expect(checks.filter((c) => c.required && !c.ok)).toEqual([]);
    expect(checks.find((c) => c.name === 'memory-budget')?.detail).toMatch(/budget of \d+ bytes/);
  });

  it("says which Python and numpy the Python backend's models run on, or what is missing", async () => {
    const checks = await runDoctor({ expectGpu: false, amiFamily: 'al2023', json: false }, NO_SERVER);
    expect(checks.find((c) => c.name === 'python-backend')).toMatchObject({
      ok: true,
      required: false,
      detail: expect.stringMatching(/python3: Python 3\.\d+\.\d+, numpy \d+\.\d+/),
    });
    const missing = await probeHostPython('/no/such/python3');
    expect(missing.problem).toMatch(/\/no\/such\/python3 does not run: .*apt-get install python3 python3-numpy/);
  });

  it('reports a bad --memory-limit as a failed check', async () => {
    const checks = await runDoctor({ expectGpu: false, amiFamily: 'al2023', json: false, memoryLimit: 'lots' }, NO_SERVER);
    expect(checks.find((c) => c.name === 'memory-budget')).toMatchObject({ ok: false, required: true });
  });
});
