import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixedBatchModel, identity, simpleAddSub, slowModel } from '@batchwise/modelgen';
import { probeExecutionProvider } from '../packages/server/src/backends/onnxruntime/provider-probe.ts';
import { identityConfig as fp32Config, makeRepository } from './support/repository.ts';
import { isReady, postJson, startTestServer, getJson } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

// These tests are about a host where CUDA cannot be used; on one where it can, a KIND_GPU model
// loads on the GPU and they have nothing to check (the probe is what the server itself uses).
const cuda = await probeExecutionProvider('cuda');
const cudaMissing = !cuda.usable;
if (!cudaMissing) console.info('CUDA is usable here: the CUDA-missing and --allow-cpu-fallback tests are skipped');

describe('a model that fails to load is reported while the others serve', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([
      { name: 'good', model: identity('FP32', [4]), config: fp32Config('good') },
      {
        name: 'wrong_tensor',
        model: identity('FP32', [4]),
        config: fp32Config('wrong_tensor').replace('name: "INPUT0"', 'name: "IMAGE"'),
      },
      { name: 'wrong_type', model: identity('FP32', [4]), config: fp32Config('wrong_type').replace('TYPE_FP32', 'TYPE_INT32') },
      { name: 'bad_syntax', model: identity('FP32', [4]), config: 'name: "bad_syntax"\nmax_batch_size: 8\ninput [ { name: \n' },
      { name: 'fixed_first_dim', model: fixedBatchModel(), config: fp32Config('fixed_first_dim') },
      { name: 'on_gpu', model: identity('FP32', [4]), config: fp32Config('on_gpu', 'instance_group [ { kind: KIND_GPU } ]') },
      { name: 'two_instances', model: simpleAddSub(), config: undefined },
      {
        name: 'custom_file',
        model: identity('FP32', [4]),
        fileName: 'net.onnx',
        config: fp32Config('custom_file', 'default_model_filename: "net.onnx"'),
      },
      { name: 'two_versions', model: identity('FP32', [4]), versions: [1, 2] },
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
    const row = json.find((r: any) => r.name === name);
    expect(row, `index row for ${name}`).toBeDefined();
    expect(row.state).toBe('UNAVAILABLE');
    return row.reason;
  };

  it('serves the good ones, and the server is live but not ready', async () => {
    expect((await fetch(`${server.url}/v2/models/good/ready`)).status).toBe(200);
    expect((await fetch(`${server.url}/v2/health/live`)).status).toBe(200);
    expect(await isReady(server.url)).toBe(false);
    const { status } = await postJson(`${server.url}/v2/models/good/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
    });
    expect(status).toBe(200);
  });

  it('names the tensor a config gets wrong', async () => {
    expect(await reasonOf('wrong_tensor')).toMatch(/IMAGE/);
    expect(await reasonOf('wrong_type')).toMatch(/INPUT0/);
  });

  it('points to the line and column of a syntax error', async () => {
    expect(await reasonOf('bad_syntax')).toMatch(/config\.pbtxt:\d+:\d+/);
  });

  it('refuses max_batch_size > 0 on a model without a batch dimension', async () => {
    expect(await reasonOf('fixed_first_dim')).toMatch(/batch/i);
  });

  it.skipIf(!cudaMissing)('fails a KIND_GPU model without CUDA, saying why, instead of silently using the CPU', async () => {
    const reason = await reasonOf('on_gpu');
    expect(reason).toMatch(/KIND_GPU requires the CUDA execution provider/);
    expect(reason).toMatch(/--allow-cpu-fallback/);
    const { status, json } = await postJson(`${server.url}/v2/models/on_gpu/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
    });
    expect(status).toBe(404);
    expect(json.error).toMatch(/on_gpu/);
  });

  it('auto-completes a model without config.pbtxt and honours default_model_filename', async () => {
    expect((await fetch(`${server.url}/v2/models/two_instances/ready`)).status).toBe(200);
    expect((await fetch(`${server.url}/v2/models/custom_file/ready`)).status).toBe(200);
  });

  it('serves the latest version by default (version policy latest 1)', async () => {
    const meta = await getJson(`${server.url}/v2/models/two_versions`);
    expect(meta.versions).toEqual(['2']);
    expect((await fetch(`${server.url}/v2/models/two_versions/versions/1/ready`)).status).toBe(400);
  });
});

describe.skipIf(!cudaMissing)('--allow-cpu-fallback runs a KIND_GPU model on CPU, visibly', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([
      { name: 'on_gpu', model: identity('FP32', [4]), config: fp32Config('on_gpu', 'instance_group [ { kind: KIND_GPU count: 2 } ]') },
    ]);
    remove = repo.remove;
    server = await startTestServer([repo.dir], { allowCpuFallback: true });
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  it('loads, shows the real provider and why', async () => {
    const meta = await getJson(`${server.url}/v2/models/on_gpu`);
    expect(meta.parameters.execution_provider).toBe('CPUExecutionProvider');
    expect(meta.parameters.cpu_fallback_reason).toMatch(/CUDA/);
    const text = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    expect(text).toContain('batchwise_model_ready{model="on_gpu",version="1",execution_provider="CPUExecutionProvider"} 1');
  });
});

describe('--strict-model-config', () => {
  it('refuses a model without config.pbtxt', async () => {
    const repo = await makeRepository([{ name: 'bare', model: identity('FP32', [4]) }]);
    const server = await startTestServer([repo.dir], { strictModelConfig: true });
    try {
      const { json } = await postJson(`${server.url}/v2/repository/index`, {});
      expect(json[0]).toMatchObject({ name: 'bare', state: 'UNAVAILABLE' });
      expect(json[0].reason).toMatch(/strict-model-config/);
    } finally {
      await server.close();
      await repo.remove();
    }
  });
});

describe('version policies and session settings', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const policy = (name: string, p: string, extra = '') => fp32Config(name, `version_policy: { ${p} }\n${extra}`);
    const repo = await makeRepository([
      { name: 'all', model: identity('FP32', [4]), versions: [1, 2, 3], config: policy('all', 'all: {}') },
      { name: 'latest2', model: identity('FP32', [4]), versions: [1, 2, 3], config: policy('latest2', 'latest: { num_versions: 2 }') },
      {
        name: 'specific',
        model: identity('FP32', [4]),
        versions: [1, 2, 3],
        config: policy('specific', 'specific: { versions: [ 1, 3 ] }'),
      },
      {
        name: 'tuned',
        model: identity('FP32', [4]),
        config: fp32Config(
          'tuned',
          `parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
parameters { key: "gpu_mem_limit" value: { string_value: "1073741824" } }
optimization { graph { level: 1 } }`,
        ),
      },
    ]);
    remove = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const versions = async (name: string) => (await getJson(`${server.url}/v2/models/${name}`)).versions;

  it('serves every version (all), the newest N (latest), or the listed ones (specific)', async () => {
    expect(await versions('all')).toEqual(['1', '2', '3']);
    expect(await versions('latest2')).toEqual(['2', '3']);
    expect(await versions('specific')).toEqual(['1', '3']);
    const { json } = await postJson(`${server.url}/v2/models/specific/versions/1/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
    });
    expect(json.model_version).toBe('1');
  });

  it('applies session settings and says which it could not apply', async () => {
    const meta = await getJson(`${server.url}/v2/models/tuned`);
    expect(meta.parameters.gpu_mem_limit).toMatch(/not applied/);
    expect(
      (
        await postJson(`${server.url}/v2/models/tuned/infer`, {
          inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
        })
      ).status,
    ).toBe(200);
  });
});

describe('instance_group count runs requests in parallel', () => {
  let server: Server;
  let remove: () => Promise<void>;
  const WIDTH = 1024;
  // Dynamic batching off, so two requests are two executions; one intra-op thread each.
  const slowConfig = (name: string, count: number) => `
name: "${name}"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
instance_group [ { kind: KIND_CPU count: ${count} } ]
parameters { key: "batchwise_dynamic_batching" value: { string_value: "false" } }
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }`;
  beforeAll(async () => {
    const model = slowModel({ repeats: 3000, width: WIDTH });
    const repo = await makeRepository([
      { name: 'two_instances', model, config: slowConfig('two_instances', 2) },
      { name: 'one_instance', model, config: slowConfig('one_instance', 1) },
    ]);
    remove = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  /**
   * Sends two requests at once and compares the compute time the server reports with the span
   * they took end to end: executions one after the other fit inside the span, so a sum larger
   * than it can only come from executions that overlapped. No bound on how long anything takes.
   */
  async function computeOverSpan(model: string): Promise<number> {
    const request = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, WIDTH], data: new Array(WIDTH).fill(0.5) }] };
    const started = process.hrtime.bigint();
    const replies = await Promise.all([1, 2].map(() => postJson(`${server.url}/v2/models/${model}/infer`, request)));
    const spanNs = Number(process.hrtime.bigint() - started);
    expect(replies.map((r) => r.status)).toEqual([200, 200]);
    const stats = (await getJson(`${server.url}/v2/models/${model}/stats`)).model_stats[0];
    expect(stats.execution_count).toBe(2);
    return stats.inference_stats.compute_infer.ns / spanNs;
  }

  it('overlaps two executions with count: 2, and not with count: 1', async () => {
    expect(await computeOverSpan('two_instances')).toBeGreaterThan(1);
    expect(await computeOverSpan('one_instance')).toBeLessThanOrEqual(1);
  });
});
