import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient } from '@batchwise/client';
import { identity, slowModel } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { getJson, postJson, startTestServer } from './support/server.ts';

const WIDTH = 256;

/** A 4-float identity model with `batching` and a latency objective of `objectiveMs`. */
const tiny = (name: string, batching: string, objectiveMs: string) => ({
  name,
  model: identity('FP32', [4]),
  config: [
    `name: "${name}"`,
    'max_batch_size: 4',
    'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]',
    'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]',
    batching,
    `parameters { key: "batchwise_latency_objective_ms" value: { string_value: "${objectiveMs}" } }`,
  ].join('\n'),
});

describe('latency objective (batchwise_latency_objective_ms) through a real server', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([
      {
        name: 'objective',
        // 20000 chained 256x256 matmuls: a run takes tens of milliseconds on any machine, far past the 1 ms objective.
        model: slowModel({ repeats: 20000, width: WIDTH }),
        config: `name: "objective"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
dynamic_batching { }
parameters { key: "batchwise_latency_objective_ms" value: { string_value: "1" } }`,
      },
      // The objective needs dynamic batching; a value must be a positive number of milliseconds.
      tiny('unbatched_objective', 'parameters { key: "batchwise_dynamic_batching" value: { string_value: "false" } }', '50'),
      tiny('bad_objective', 'dynamic_batching { }', 'soon'),
    ]);
    remove = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const send = () =>
    postJson(`${server.url}/v2/models/objective/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, WIDTH], data: Array(WIDTH).fill(0.5) }],
    });

  it('refuses with 503 naming the objective what the queue ahead would make late; statistics and metrics show it', async () => {
    // The first run teaches the profile (nothing is refused before one): a run takes far longer than 1 ms.
    expect((await send()).status).toBe(200);
    // A burst: the first request finds the instance free and runs; every other one finds it busy or a queue ahead.
    const burst = await Promise.all(Array.from({ length: 4 }, send));
    const refused = burst.filter((r) => r.status === 503);
    const statuses = burst.map((r) => `${r.status} ${JSON.stringify(r.json?.error ?? '')}`).join('; ');
    expect(burst.filter((r) => r.status === 200).length, statuses).toBeGreaterThanOrEqual(1);
    expect(refused.length, statuses).toBeGreaterThanOrEqual(1);
    for (const r of refused) expect(r.json.error, statuses).toBe("request would miss the latency objective of 1 ms for model 'objective'");
    const shed = refused.length;

    const stats = (await getJson(`${server.url}/v2/models/objective/stats`)).model_stats[0];
    expect(stats.inference_stats.fail.count).toBe(shed);
    const objective = stats.batchwise_latency_objective;
    expect(objective).toMatchObject({ objective_ms: 1, shed: { admission: shed, queued: 0 } });
    expect(objective.profile).toHaveLength(1);
    expect(objective.profile[0].by_batch_size[0].batch_size).toBe(1);
    expect(objective.profile[0].by_batch_size[0].ms).toBeGreaterThan(1);

    const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    const labels = 'model="objective",version="1"';
    expect(metrics).toContain(`batchwise_latency_objective_seconds{${labels}} 0.001\n`);
    // Labels sorted by name, as Triton's prometheus-cpp writes them.
    const withReason = (reason: string) => `model="objective",reason="${reason}",version="1"`;
    expect(metrics).toContain(`batchwise_latency_objective_shed_total{${withReason('admission')}} ${shed}\n`);
    expect(metrics).toContain(`batchwise_latency_objective_shed_total{${withReason('queued')}} 0\n`);
    expect(metrics).toContain(`nv_inference_request_failure{${withReason('REJECTED')}} ${shed}\n`);
    // The fit's slope in seconds: a run's time (one size seen), whatever the machine's speed.
    const slope = new RegExp(`batchwise_latency_objective_profile_seconds\\{${labels},instance="0",term="per_sample"\\} (\\S+)\n`).exec(
      metrics,
    );
    expect(Number(slope?.[1])).toBeCloseTo(objective.profile[0].per_sample_ms / 1e3, 6);
    expect(metrics).toMatch(new RegExp(`batchwise_latency_objective_target_batch_size\\{${labels}\\} \\d+\n`));
    expect(metrics).toContain(`batchwise_latency_objective_arrival_rate{${labels}} `);
  });

  it('refuses from the headers, before reading the body: a request whose body never comes still gets its 503 (issue 30)', async () => {
    const running = send(); // the instance is busy for tens of milliseconds: past the 1 ms objective for anything behind it
    await new Promise((r) => setTimeout(r, 5));
    const socket = connect(server.httpPort, '127.0.0.1');
    const answer = new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString();
        if (text.includes('\r\n\r\n') && text.includes('}')) resolve(text);
      });
    });
    // Headers only: the body it announces never arrives.
    socket.write('POST /v2/models/objective/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n');
    const text = await answer;
    socket.destroy();
    expect(text).toMatch(/^HTTP\/1\.1 503 /);
    expect(text).toContain("request would miss the latency objective of 1 ms for model 'objective'");
    expect((await running).status).toBe(200);
    const objective = (await getJson(`${server.url}/v2/models/objective/stats`)).model_stats[0].batchwise_latency_objective;
    expect(objective.shed.admission).toBeGreaterThanOrEqual(1);
    expect(objective.profile[0].handoff_ms).toBeGreaterThanOrEqual(0);
    expect(objective.profile[0].reply_ms_per_sample).toBeGreaterThan(0);
    expect(objective.event_loop_lag_ms).toBeGreaterThanOrEqual(0);
  });

  it('holds refusals on a connection that keeps being refused: at the deadline, then two and four objectives', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, WIDTH], data: Array(WIDTH).fill(0.5) }] });
    const request = `POST /v2/models/objective/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    /** Three requests in a row on one connection while the instance is busy: their statuses and times. */
    const refusedInARow = async () => {
      const running = send(); // busy for tens of milliseconds: every request behind it is refused
      await new Promise((r) => setTimeout(r, 5));
      const socket = connect(server.httpPort, '127.0.0.1');
      let buffered = '';
      const statuses: string[] = [];
      let onAnswer: (() => void) | undefined;
      socket.on('data', (chunk) => {
        buffered += chunk.toString();
        if (buffered.includes('}')) {
          statuses.push(buffered.split('\r\n')[0]!);
          buffered = '';
          onAnswer?.();
        }
      });
      const timings: number[] = [];
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        await new Promise<void>((resolve) => {
          onAnswer = resolve;
          socket.write(request);
        });
        timings.push(performance.now() - started);
      }
      socket.destroy();
      expect((await running).status).toBe(200);
      return { statuses, timings };
    };
    // 1 ms, then 2, then 4 at least (the client's clock sees the hold and whatever the machine adds; a
    // timer may fire up to a millisecond's rounding early); a fresh connection starts over.
    const held = ({ timings }: { timings: number[] }) => timings[1]! >= 1.5 && timings[2]! >= 3.5;
    // The hold applies to refusals decided from the headers. On a machine starved of CPU the running
    // request may not have started when one arrives, which is then refused in the queue at its
    // deadline, unheld: such a round says nothing of the hold, and is tried again.
    const rounds = [await refusedInARow()];
    while (!held(rounds.at(-1)!) && rounds.length < 4) rounds.push(await refusedInARow());
    for (const { statuses } of rounds) expect(statuses).toEqual(Array(3).fill('HTTP/1.1 503 Service Unavailable'));
    expect(held(rounds.at(-1)!), JSON.stringify(rounds.map((r) => r.timings))).toBe(true);
  });

  it('over gRPC too, from what the message names, before its tensors are decoded', async () => {
    const grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    try {
      const running = send();
      await new Promise((r) => setTimeout(r, 5));
      const refused = grpc.infer({
        model: 'objective',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, WIDTH], data: Array(WIDTH).fill(0.5) }],
      });
      await expect(refused).rejects.toThrow("request would miss the latency objective of 1 ms for model 'objective'");
      expect((await running).status).toBe(200);
    } finally {
      grpc.close();
    }
  });

  it('a bad objective, or one on a model without dynamic batching, fails that model load naming the parameter; the server serves the rest', async () => {
    const response = await fetch(`${server.url}/v2/repository/index`, { method: 'POST', body: '{}' });
    const index = (await response.json()) as { name: string; state?: string; reason?: string }[];
    expect(index.find((m) => m.name === 'bad_objective')).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringContaining("parameter batchwise_latency_objective_ms must be a positive number of milliseconds, got 'soon'"),
    });
    expect(index.find((m) => m.name === 'unbatched_objective')).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringContaining('batchwise_latency_objective_ms requires dynamic_batching'),
    });
    expect(index.find((m) => m.name === 'objective')).toMatchObject({ state: 'READY' });
  });
});

/** A JavaScript identity over 4 floats whose every batch sleeps 300 ms: an instance busy without taking a core. */
const SLEEPY_CODE = `import { tensor } from '@batchwise/backend';
export default {
  async execute(requests) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    return requests.map((r) => ({ outputs: [tensor('OUTPUT0', 'FP32', r.inputs.INPUT0.shape, r.inputs.INPUT0.data)] }));
  },
};
`;

function connected(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

describe('latency objective: the refusals it holds (issue 44)', () => {
  it('hold on one timer: while refusals wait for their deadlines the event loop sleeps, polling no clock', async () => {
    const repo = await makeRepository([
      {
        name: 'sleepy',
        config: `name: "sleepy"
backend: "js"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }
parameters { key: "batchwise_latency_objective_ms" value: { string_value: "20" } }`,
        files: { '1/model.mjs': SLEEPY_CODE },
      },
    ]);
    const server = await startTestServer([repo.dir]);
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
    const request = `POST /v2/models/sleepy/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const send = () => postJson(`${server.url}/v2/models/sleepy/infer`, JSON.parse(body));
    /**
     * While a run keeps the instance busy, a request every 1.5 ms on connections of its own, each refused
     * from its headers and held 20 ms: the event loop's utilization over 40 ms while refusals come due.
     */
    const round = async () => {
      const sockets = await Promise.all(Array.from({ length: 48 }, () => connected(server.httpPort)));
      const refused: string[] = [];
      for (const socket of sockets) socket.on('data', (chunk) => refused.push(chunk.toString().split('\r\n')[0]!));
      const running = send(); // 300 ms without a core: every request behind it is refused
      await new Promise((r) => setTimeout(r, 10));
      let sent = 0;
      const sending = setInterval(() => (sent < sockets.length ? sockets[sent++]!.write(request) : clearInterval(sending)), 1.5);
      await new Promise((r) => setTimeout(r, 30)); // refusals come due from here on, one every 1.5 ms
      const before = performance.eventLoopUtilization();
      await new Promise((r) => setTimeout(r, 40));
      const utilization = performance.eventLoopUtilization(before).utilization;
      expect((await running).status).toBe(200);
      clearInterval(sending);
      for (const socket of sockets) socket.destroy();
      expect(refused.length).toBeGreaterThan(16);
      expect(new Set(refused)).toEqual(new Set(['HTTP/1.1 503 Service Unavailable']));
      return utilization;
    };
    try {
      expect((await send()).status).toBe(200); // the profile: a run takes 300 ms, past the 20 ms objective
      // A precise timer per refusal polled the clock on every turn of the loop (this process's: the server runs
      // in the test's) through each refusal's last millisecond, and some refusal always was in it: 0.75-0.85 of
      // the loop, against 0.25-0.4 on one timer (the refusals' own work). The least of up to three rounds.
      const utilizations = [await round()];
      while (Math.min(...utilizations) >= 0.55 && utilizations.length < 3) utilizations.push(await round());
      expect(Math.min(...utilizations), utilizations.map((u) => u.toFixed(2)).join(', ')).toBeLessThan(0.55);
    } finally {
      await server.close();
      await repo.remove();
    }
  });
});
