/**
 * Triton's rate limiter on a real server (--rate-limit=execution_count): JavaScript models that
 * share one resource of count 1 report when each execution started and ended, so the test sees
 * that executions never overlap, that priority weights the turns, that a queue timeout fires
 * while its batch waits for the resource, and that a config asking for more than exists fails.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, HttpClient, type InferResult } from '@batchwise/client';
import { serveCommand } from '../packages/server/src/cli/serve.ts';
import { makeRepository } from './support/repository.ts';
import { postJson, startTestServer } from './support/server.ts';

/** Sleeps X milliseconds; START and END are when the execution began and ended (ms, comparable across threads). */
const SLEEPER = `
import { tensor } from '@batchwise/backend';
export default {
  async execute(requests) {
    if (requests[0].inputs.X.data[0] < 0) process.exit(1);
    const start = performance.timeOrigin + performance.now();
    await new Promise((resolve) => setTimeout(resolve, requests[0].inputs.X.data[0]));
    const end = performance.timeOrigin + performance.now();
    return requests.map((r) => {
      const rows = r.inputs.X.shape.length > 1 ? [r.inputs.X.shape[0], 1] : [1];
      const n = rows[0];
      return { outputs: [tensor('START', 'FP64', rows, new Array(n).fill(start)), tensor('END', 'FP64', rows, new Array(n).fill(end))] };
    });
  },
};
`;

function config(name: string, { priority = 1, gpu = 1, batching = '' } = {}): string {
  return `name: "${name}"
backend: "js"
max_batch_size: ${batching ? 4 : 0}
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "START" data_type: TYPE_FP64 dims: [ 1 ] }, { name: "END" data_type: TYPE_FP64 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 rate_limiter { resources [ { name: "gpu" count: ${gpu} } ] priority: ${priority} } } ]
${batching}
`;
}

const models = [
  { name: 'blocker', config: config('blocker') },
  { name: 'high', config: config('high', { priority: 1 }) },
  { name: 'low', config: config('low', { priority: 2 }) },
  {
    name: 'timed',
    config: config('timed', {
      batching: 'dynamic_batching { default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 100000 } }',
    }),
  },
  { name: 'greedy', config: config('greedy', { gpu: 2 }) },
];

let server: Awaited<ReturnType<typeof startTestServer>>;
let client: HttpClient;
let removeRepo: () => Promise<void>;

beforeAll(async () => {
  const repo = await makeRepository(models.map((m) => ({ ...m, files: { '1/model.mjs': SLEEPER } })));
  removeRepo = repo.remove;
  server = await startTestServer([repo.dir], {
    strictReadiness: false,
    rateLimit: 'execution_count',
    rateLimitResources: ['gpu:1'],
    workerHeapLimitBytes: 64 * 2 ** 20,
  });
  client = new HttpClient({ url: server.url });
});
afterAll(async () => {
  await client?.close();
  await server?.close();
  await removeRepo?.();
});

interface Execution {
  readonly model: string;
  readonly start: number;
  readonly end: number;
}

function sleep(model: string, ms: number, parameters?: Record<string, number>): Promise<InferResult> {
  const shape = model === 'timed' ? [1, 1] : [1];
  return client.infer({
    model,
    inputs: [{ name: 'X', datatype: 'FP32', shape, data: Float32Array.of(ms) }],
    ...(parameters && { parameters }),
  });
}

function executionOf(model: string, result: InferResult): Execution {
  const value = (name: string) => (result.outputs.find((o) => o.name === name)!.data as Float64Array)[0]!;
  return { model, start: value('START'), end: value('END') };
}

/** Resolves once the blocker holds the resource: its grant is counted in its statistics before it executes. */
async function blockerRunning<T>(blocker: () => Promise<T>): Promise<{ running: Promise<T> }> {
  const grants = async () => (await client.modelStatistics('blocker'))[0]!.batchwise_rate_limiter_wait?.count ?? 0;
  const before = await grants();
  const running = blocker();
  while ((await grants()) === before) await new Promise((resolve) => setTimeout(resolve, 5));
  return { running };
}

async function pendingOf(model: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`nv_inference_pending_request_count{model="${model}",version="1"}`));
  return Number(line?.split(' ')[1] ?? NaN);
}

describe('two models sharing a resource of count 1', () => {
  it('never execute at the same time, and priority 2 gets about half the turns of priority 1 while both wait', async () => {
    const { running: blocker } = await blockerRunning(() => sleep('blocker', 1500));
    // Both queues fill while the blocker holds the resource.
    const requests = Array.from({ length: 30 }, () => [sleep('high', 8), sleep('low', 8)]).flat();
    const results = await Promise.all(requests);
    const executions = [
      executionOf('blocker', await blocker),
      ...results.map((result, i) => executionOf(i % 2 === 0 ? 'high' : 'low', result)),
    ].sort((a, b) => a.start - b.start);
    for (let i = 1; i < executions.length; i++) {
      expect(executions[i]!.start, `${executions[i]!.model} started before ${executions[i - 1]!.model} ended`).toBeGreaterThanOrEqual(
        executions[i - 1]!.end,
      );
    }
    const blockerEnd = executions.find((e) => e.model === 'blocker')!.end;
    const afterBlocker = executions.filter((e) => e.start >= blockerEnd).slice(0, 30);
    const high = afterBlocker.filter((e) => e.model === 'high').length;
    // Stride scheduling gives 20 of 30; the bounds allow for requests still arriving as the blocker ended.
    expect(high).toBeGreaterThanOrEqual(17);
    expect(high).toBeLessThanOrEqual(23);

    const [stats] = await client.modelStatistics('low');
    expect(stats!.batchwise_rate_limiter_wait!.count).toBe(30);
    expect(stats!.batchwise_rate_limiter_wait!.ns).toBeGreaterThan(0);
    const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/batchwise_rate_limiter_wait_duration_us\{model="low",version="1"\} [1-9]/);
    expect(metrics).toMatch(/batchwise_rate_limiter_wait_seconds_count\{model="low",version="1"\} 30/);
  });

  it('a request waiting for the resource is pending, and its queue timeout fires while its batch waits', async () => {
    const order: string[] = [];
    const { running: blocker } = await blockerRunning(() => sleep('blocker', 1000).then(() => order.push('blocker')));
    const waiting = sleep('high', 1).then(() => order.push('high'));
    let pending = 0;
    while (pending === 0 && order.length === 0) {
      pending = await pendingOf('high');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(order).toEqual([]); // seen while the blocker still held the resource
    expect(pending).toBe(1);
    const timedOut = await sleep('timed', 1).then(
      () => 'answered',
      (error: BatchwiseClientError) => `${error.httpStatus}: ${error.message}`,
    );
    order.push('timed');
    expect(timedOut).toMatch(/^503: .*Request timeout expired/);
    await Promise.all([blocker, waiting]);
    expect(order).toEqual(['timed', 'blocker', 'high']);
    expect((await client.modelStatistics('timed'))[0]!.execution_count).toBe(0);
    expect(await pendingOf('high')).toBe(0);
  });
});

describe('failures', () => {
  it('an instance that crashes mid-execution gives the resource back', async () => {
    await expect(sleep('blocker', -1)).rejects.toThrow();
    const result = await sleep('high', 1);
    expect(executionOf('high', result).end).toBeGreaterThan(0);
  });
});

describe('loading', () => {
  it('a config asking for more of a resource than the command line gives fails to load, naming it', async () => {
    const { json } = await postJson(`${server.url}/v2/repository/index`, {});
    const row = json.find((r: { name: string }) => r.name === 'greedy');
    expect(row.state).toBe('UNAVAILABLE');
    expect(row.reason).toMatch(/rate_limiter resource 'gpu' on device 0 asks for 2 but --rate-limit-resource gives 1/);
  });
});

describe('flags', () => {
  it('--rate-limit-resource values that do not parse stop the server with the reason', async () => {
    const start = (value: string) => startTestServer([], { rateLimit: 'execution_count', rateLimitResources: [value], allowHttp: false });
    await expect(start('gpu')).rejects.toThrow("--rate-limit-resource must be <name>:<count>[:<device>], got 'gpu'");
    await expect(start('gpu:two')).rejects.toThrow("--rate-limit-resource 'gpu:two': count 'two' must be a whole number >= 0");
    await expect(start('gpu:1:-1')).rejects.toThrow("--rate-limit-resource 'gpu:1:-1': device '-1' must be a device id >= 0");
  });

  it('--rate-limit takes off or execution_count', async () => {
    let err = '';
    const command = serveCommand()
      .exitOverride()
      .configureOutput({ writeErr: (text) => (err += text) });
    await expect(command.parseAsync(['--model-repository', '/nowhere', '--rate-limit=sometimes'], { from: 'user' })).rejects.toThrow();
    expect(err).toMatch(/'sometimes' is invalid\. Allowed choices are off, execution_count/);
  });
});
