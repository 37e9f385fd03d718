import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mlp, serializeModel } from '@batchwise/modelgen';
import { loadOrt } from '@batchwise/modelgen/test-support/ort.ts';
import { probeExecutionProvider } from '../packages/server/src/backends/onnxruntime/provider-probe.ts';
import { vulkanMissing, vulkanSetup } from '../packages/server/src/backends/vulkan-detect.ts';
import { makeRepository } from './support/repository.ts';
import { getJson, postJson, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

// Where a Vulkan adapter exists, the webgpu model runs there and is compared with ONNX Runtime on
// the CPU; elsewhere (CI, this repository's machines) it must fail to load, saying what is missing.
const webgpu = await probeExecutionProvider('webgpu');
const tensorrt = await probeExecutionProvider('tensorrt');
console.info(`WebGPU here: ${webgpu.usable ? 'usable' : webgpu.reason}`);

const MODEL = mlp({ layers: 3, width: 64, inputSize: 16, seed: 7 });
const ROWS = 8;
/**
 * WebGPU runs FP32 MatMul in its own summation order (and may fuse), so answers differ from the
 * CPU's in the last bits: within 1e-4 relative to the output's largest magnitude.
 */
const RELATIVE_TOLERANCE = 1e-4;

const gpuConfig = (name: string, accelerator: string) => `
name: "${name}"
max_batch_size: ${ROWS}
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 64 ] } ]
instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]
optimization { execution_accelerators { gpu_execution_accelerator: [ ${accelerator} ] } }`;

const input = Float32Array.from({ length: ROWS * 16 }, (_, i) => Math.sin(i * 0.37) * 2);

async function cpuAnswer(): Promise<Float32Array> {
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(serializeModel(MODEL), { executionProviders: ['cpu'] });
  try {
    const out = await session.run({ INPUT0: new ort.Tensor('float32', input, [ROWS, 16]) });
    return out['OUTPUT0']!.data as Float32Array;
  } finally {
    await session.release();
  }
}

async function serverAnswer(server: Server, model: string): Promise<Float32Array> {
  const { status, json } = await postJson(`${server.url}/v2/models/${model}/infer`, {
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [ROWS, 16], data: [...input] }],
  });
  expect(status, JSON.stringify(json)).toBe(200);
  return Float32Array.from(json.outputs[0].data as number[]);
}

describe('KIND_GPU models on the webgpu and tensorrt accelerators', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([
      { name: 'on_webgpu', model: MODEL, config: gpuConfig('on_webgpu', '{ name: "webgpu" }') },
      {
        name: 'on_tensorrt',
        model: MODEL,
        config: gpuConfig('on_tensorrt', '{ name: "tensorrt" parameters { key: "precision_mode" value: "FP16" } }'),
      },
    ]);
    remove = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const reasonOf = async (name: string): Promise<string> => {
    const { json } = await postJson(`${server.url}/v2/repository/index`, {});
    const row = json.find((r: { name: string }) => r.name === name);
    expect(row.state).toBe('UNAVAILABLE');
    return row.reason;
  };

  it.runIf(webgpu.usable)(`answers on WebGPU as ONNX Runtime does on the CPU, within ${RELATIVE_TOLERANCE} relative`, async () => {
    const meta = await getJson(`${server.url}/v2/models/on_webgpu`);
    expect(meta.parameters.execution_provider).toBe('WebGpuExecutionProvider');
    const [expected, actual] = await Promise.all([cpuAnswer(), serverAnswer(server, 'on_webgpu')]);
    const scale = Math.max(...expected.map(Math.abs));
    const worst = Math.max(...expected.map((e, i) => Math.abs(e - actual[i]!)));
    expect(worst / scale).toBeLessThanOrEqual(RELATIVE_TOLERANCE);
  });

  it.skipIf(webgpu.usable)('fails a webgpu model to load where no Vulkan adapter exists, naming what is missing', async () => {
    const reason = await reasonOf('on_webgpu');
    expect(reason).toMatch(/KIND_GPU with the webgpu accelerator requires a Vulkan GPU adapter/);
    const missing = vulkanMissing(vulkanSetup());
    if (missing) expect(reason).toContain(missing);
    else expect(reason).toMatch(/gave no adapter WebGPU supports/);
    expect(reason).toMatch(/--allow-cpu-fallback/);
  });

  it.skipIf(tensorrt.usable)('fails a tensorrt model to load where TensorRT is missing, naming it', async () => {
    const reason = await reasonOf('on_tensorrt');
    expect(reason).toMatch(/KIND_GPU with the tensorrt accelerator requires ONNX Runtime's TensorRT execution provider/);
    expect(reason).toMatch(/libonnxruntime_providers_tensorrt\.so|libnvinfer/);
  });
});

describe.skipIf(webgpu.usable)('--allow-cpu-fallback runs a webgpu model on the CPU, visibly', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([{ name: 'on_webgpu', model: MODEL, config: gpuConfig('on_webgpu', '{ name: "webgpu" }') }]);
    remove = repo.remove;
    server = await startTestServer([repo.dir], { allowCpuFallback: true });
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  it('loads on the CPU, says why, and answers as ONNX Runtime does', async () => {
    const meta = await getJson(`${server.url}/v2/models/on_webgpu`);
    expect(meta.parameters.execution_provider).toBe('CPUExecutionProvider');
    expect(meta.parameters.cpu_fallback_reason).toMatch(/webgpu accelerator requires a Vulkan GPU adapter/);
    expect(await serverAnswer(server, 'on_webgpu')).toEqual(await cpuAnswer());
  });
});
