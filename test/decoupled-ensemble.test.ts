/**
 * Ensembles with decoupled steps on real servers (issue 36): Triton's own L0_decoupled ensembles
 * (simple_repeat, sequence_repeat, fan_repeat, repeat_square, nested_square) with zero, one and many
 * responses per request over gRPC ModelStreamInfer, checked as Triton's decoupled_test.py checks them;
 * the pipelines Triton refuses; an error after some responses (from the decoupled step and from a step
 * after it); batching of a downstream step across requests; every cancellation path (SSE closed, gRPC
 * stream cancelled, gRPC deadline) reaching the running decoupled step and the queued step after it,
 * counted CANCELED once; and a stalled reader holding the decoupled step back with a bounded, charged
 * amount held between steps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PROTO_DIR, GrpcClient, GrpcStatus, HttpClient, type InferRequest, type StreamResponse } from '@batchwise/client';
import { L0_DECOUPLED_MODELS, PIPELINE_MODELS } from './support/decoupled-ensembles.ts';
import { readMetric } from './support/metrics.ts';
import { serveModels, type ServedModels } from './support/server.ts';
import { upstreamClients, type AnyClient } from './support/upstream-grpc.ts';
import { waitFor } from './support/wait-for.ts';

let served: ServedModels;
let grpc: GrpcClient;
let http: HttpClient;
let raw: AnyClient;

beforeAll(async () => {
  served = await serveModels([...L0_DECOUPLED_MODELS, ...PIPELINE_MODELS]);
  grpc = new GrpcClient({ url: `127.0.0.1:${served.server.grpcPort}` });
  http = served.client;
  raw = upstreamClients(`127.0.0.1:${served.server.grpcPort}`, DEFAULT_PROTO_DIR).inference;
});
afterAll(async () => {
  raw?.close();
  await grpc?.close();
  await served?.close();
});

/** Every answer of one stream to `requests`, written at once, until each had its final response. */
async function streamAll(requests: readonly InferRequest[]): Promise<StreamResponse[]> {
  const stream = grpc.streamInfer();
  for (const r of requests) stream.write(r);
  const answers: StreamResponse[] = [];
  let finals = 0;
  for await (const answer of stream) {
    answers.push(answer);
    if (answer.final && ++finals === requests.length) break;
  }
  stream.end();
  return answers;
}

const idOf = (answer: StreamResponse) => (answer.ok ? answer.result.id : answer.id);
const valueOf = (answer: StreamResponse, name: string): number | null => {
  if (!answer.ok) return null;
  const output = answer.result.outputs.find((o) => o.name === name);
  return output ? Number((output.data as ArrayLike<number>)[0]) : null;
};

describe("Triton's L0_decoupled ensembles", () => {
  /** A request as decoupled_test.py sends it: IN = offset.., DELAY per element, WAIT; with an empty final response. */
  const repeat = (model: string, id: string, count: number, outputs: string[]): InferRequest => ({
    model,
    id,
    inputs: [
      { name: 'IN', datatype: 'INT32', shape: [count], data: Array.from({ length: count }, (_, i) => 100 + i) },
      { name: 'DELAY', datatype: 'UINT32', shape: [count], data: Array.from({ length: count }, () => 5) },
      { name: 'WAIT', datatype: 'UINT32', shape: [1], data: [0] },
    ],
    outputs: outputs.map((name) => ({ name })),
    parameters: { triton_enable_empty_final_response: true },
  });

  /** Each request's answers as [OUT, IDX?, final]; five requests of `count` each in one stream. */
  async function run(model: string, count: number, outputs: string[]) {
    const ids = ['0', '1', '2', '3', '4'];
    const answers = await streamAll(ids.map((id) => repeat(model, id, count, outputs)));
    for (const a of answers) if (!a.ok) throw a.error;
    return ids.map((id) =>
      answers
        .filter((a) => idOf(a) === id)
        .map((a) => [valueOf(a, 'OUT'), ...(outputs.includes('IDX') ? [valueOf(a, 'IDX')] : []), a.final]),
    );
  }

  /** decoupled_test.py's expectations: what each request's responses carry, then the final flag alone. */
  const expected = {
    repeat: (count: number) => [...Array.from({ length: count }, (_, j) => [100 + j, j, false]), [null, null, true]],
    fan: (count: number) => [...Array.from({ length: count }, (_, j) => [2 * (100 + j), false]), [null, true]],
    // Each value n of the repeat step answered n times by the square step.
    nested: (count: number) => [
      ...Array.from({ length: count }, (_, j) => Array.from({ length: 100 + j }, () => [100 + j, false])).flat(),
      [null, true],
    ],
  };

  for (const count of [0, 1, 5]) {
    it(`simple_repeat and sequence_repeat (a step after the decoupled one): ${count} responses per request, in order`, async () => {
      for (const model of ['simple_repeat', 'sequence_repeat']) {
        expect(await run(model, count, ['OUT', 'IDX'])).toEqual(Array.from({ length: 5 }, () => expected.repeat(count)));
      }
    });
  }

  it('fan_repeat: each response fans out to two steps, whose outputs meet again in a third', async () => {
    for (const count of [0, 1, 5]) {
      expect(await run('fan_repeat', count, ['OUT'])).toEqual(Array.from({ length: 5 }, () => expected.fan(count)));
    }
  });

  it('repeat_square and nested_square: a decoupled step (or a decoupled ensemble) feeding another decoupled step', async () => {
    for (const model of ['repeat_square', 'nested_square']) {
      for (const count of [0, 1, 3]) {
        expect(await run(model, count, ['OUT'])).toEqual(Array.from({ length: 5 }, () => expected.nested(count)));
      }
    }
  });

  it('the last response carries the final flag when the decoupled step sent it with its last response', async () => {
    const answers = await streamAll([
      { model: 'pipeline', id: 'p', inputs: [{ name: 'COUNT', datatype: 'INT32', shape: [1, 1], data: [3] }], parameters: {} },
    ]);
    expect(answers.map((a) => [valueOf(a, 'N'), a.final])).toEqual([
      [0, false],
      [1, false],
      [2, true],
    ]);
  });

  it('an ensemble with a decoupled step is decoupled: its config says so, and /infer and ModelInfer refuse it in Triton words', async () => {
    const config = (await (await fetch(`${served.server.url}/v2/models/simple_repeat/config`)).json()) as {
      model_transaction_policy: { decoupled: boolean };
    };
    expect(config.model_transaction_policy).toEqual({ decoupled: true });
    const request = repeat('simple_repeat', 'x', 1, ['OUT']);
    await expect(http.infer(request)).rejects.toThrow("HTTP end point doesn't support models with decoupled transaction policy");
    await expect(grpc.infer(request)).rejects.toThrow("ModelInfer RPC doesn't support models with decoupled transaction policy");
  });

  it('refuses, as Triton does, a step pairing two decoupled steps’ responses and outputs from two decoupled steps', async () => {
    const index = await http.repositoryIndex();
    const reason = (name: string) => index.find((m) => m.name === name)?.reason ?? '';
    expect(reason('invalid_decoupled_branching')).toContain(
      "ensemble 'invalid_decoupled_branching' step 3 (model 'libtorch_nobatch_int32_int32_int32') reads 'repeat_1_out' " +
        "(from the responses of step 1 (model 'repeat_int32')) and 'repeat_2_out' (from the responses of step 2 (model 'repeat_int32'))",
    );
    expect(reason('invalid_decoupled_branching_2')).toContain(
      "ensemble 'invalid_decoupled_branching_2': its outputs come from 'OUT' (from the responses of step 1 (model 'repeat_int32')) " +
        "and 'IDX' (from the responses of step 2 (model 'repeat_int32'))",
    );
  });
});

const count = (n: number, parameters: Record<string, string | number | boolean> = {}, id?: string, model = 'pipeline'): InferRequest => ({
  model,
  ...(id !== undefined && { id }),
  inputs: [{ name: 'COUNT', datatype: 'INT32', shape: [1, 1], data: [n] }],
  parameters,
});

/** A model's CANCELED failures (metric), failures, successes and executions (statistics) and pending requests. */
async function counts(model: string) {
  const stats = (await http.modelStatistics(model))[0]!;
  return {
    canceled: await metric('nv_inference_request_failure', model, 'reason="CANCELED"'),
    failures: stats.inference_stats.fail.count,
    successes: stats.inference_stats.success.count,
    executions: stats.execution_count,
    inferences: stats.inference_count,
    pending: await metric('nv_inference_pending_request_count', model),
  };
}

function metric(name: string, model?: string, labels = ''): Promise<number> {
  return readMetric(served.server.metricsPort, name, model, labels);
}

/** A model's counts, its failures by reason and a streamer's notes: what a request that did not end as expected became. */
async function diagnosis(model: string) {
  const reasons: Record<string, number> = {};
  for (const reason of ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER']) {
    reasons[reason] = await metric('nv_inference_request_failure', model, `reason="${reason}"`);
  }
  // The instance may be held by the request that did not end: its log then does not come.
  const notes = await Promise.race([log(model), new Promise((resolve) => setTimeout(() => resolve('no log within 3 s'), 3000))]);
  return { ...(await counts(model)), reasons, log: notes };
}

/** A streamer's notes (cleared as read) and how many responses its `count` requests sent in all. */
async function log(model: string): Promise<{ notes: string[]; sent: number }> {
  for await (const result of grpc.streamResponses(count(0, { mode: 'log' }, undefined, model))) {
    const data = result.outputs.find((o) => o.name === 'DATA')!.data as Uint8Array;
    return JSON.parse(Buffer.from(data).toString()) as { notes: string[]; sent: number };
  }
  throw new Error('no log');
}

describe('errors midway', () => {
  it('an error response of the decoupled step ends the request with it, after the responses before it', async () => {
    const before = await counts('pipeline');
    const answers = await streamAll([count(0, { mode: 'error_mid' }, 'e')]);
    expect(answers.map((a) => (a.ok ? [valueOf(a, 'N'), a.final] : [a.error.message, a.final]))).toEqual([
      [0, false],
      ["in ensemble 'pipeline', model 'streamer': a failure in the middle", true],
    ]);
    expect((await counts('pipeline')).failures).toBe(before.failures + 1);
  });

  it('a step after the decoupled one failing on its third response: two responses, then its error; the stream goes on', async () => {
    const answers = await streamAll([count(5, { fail_at: 2 }, 'f'), count(2, {}, 'after')]);
    const of = (id: string) =>
      answers.filter((a) => idOf(a) === id).map((a) => (a.ok ? [valueOf(a, 'N'), a.final] : [a.error.message, a.final]));
    expect(of('f')).toEqual([
      [0, false],
      [1, false],
      ["in ensemble 'pipeline', model 'relay': relay refuses N = 2", true],
    ]);
    expect(of('after')).toEqual([
      [0, false],
      [1, true],
    ]);
  });

  it('an error before any response (the request refused by the decoupled step’s model) is the request’s only answer', async () => {
    const answers = await streamAll([count(0, { mode: 'error_final' }, 'x')]);
    expect(answers.map((a) => (a.ok ? 'ok' : [a.error.message, a.final]))).toEqual([
      ["in ensemble 'pipeline', model 'streamer': a failure at the end", true],
    ]);
  });
});

describe('order', () => {
  it("a request's responses keep the decoupled step's order when the step after it finishes them in another", async () => {
    const answers = await streamAll([count(10, { descending_ms: 4, triton_enable_empty_final_response: true }, 'o', 'ordered_pipeline')]);
    expect(answers.map((a) => valueOf(a, 'N')).filter((n) => n !== null)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
});

describe('batching', () => {
  it('the step after the decoupled one batches responses of concurrent requests: fewer executions than inferences', async () => {
    const before = await counts('relay');
    const answers = await streamAll(Array.from({ length: 8 }, (_, i) => count(16, { delay_ms: 5 }, String(i))));
    expect(answers.filter((a) => a.ok && valueOf(a, 'N') !== null)).toHaveLength(8 * 16);
    for (let i = 0; i < 8; i++) {
      expect(answers.filter((a) => idOf(a) === String(i)).map((a) => valueOf(a, 'N'))).toEqual(Array.from({ length: 16 }, (_, n) => n));
    }
    const after = await counts('relay');
    expect(after.inferences - before.inferences).toBe(8 * 16);
    expect(after.executions - before.executions).toBeLessThan(8 * 16);
  });
});

describe('cancellation reaches every step, counted CANCELED once', () => {
  /** The streamer whose requests wait for their final response as long as the default timeout (minutes). */
  const PATIENT = 'patient_streamer';
  /** Waits until the streamer's response waits in slow_int32's queue, cancels with `cancel`, then checks every count. */
  async function cancelled(cancel: () => Promise<void>) {
    const before = { ensemble: await counts('queued_pipeline'), streamer: await counts(PATIENT), slow: await counts('slow_int32') };
    await log(PATIENT);
    await cancel();
    await waitFor(async () => (await counts('queued_pipeline')).canceled === before.ensemble.canceled + 1, 30_000, 'the ensemble CANCELED');
    await waitFor(
      async () => (await counts(PATIENT)).canceled === before.streamer.canceled + 1,
      30_000,
      'the decoupled step CANCELED',
    ).catch(async (error: Error) => {
      // The failure says what the step's requests became (a log request counted CANCELED made this flaky: see decoupled.test.ts).
      throw new Error(
        `${error.message}; ${PATIENT} before ${JSON.stringify(before.streamer)}, now ${JSON.stringify(await diagnosis(PATIENT))}`,
      );
    });
    await waitFor(async () => (await counts('slow_int32')).canceled === before.slow.canceled + 1, 30_000, 'the queued step CANCELED');
    const after = { ensemble: await counts('queued_pipeline'), slow: await counts('slow_int32') };
    expect(after.ensemble).toMatchObject({ failures: before.ensemble.failures + 1, pending: 0 });
    expect(after.slow).toMatchObject({ pending: 0, executions: before.slow.executions });
    // The running JavaScript step saw its signal: its next send was refused.
    expect((await log(PATIENT)).notes).toEqual([
      expect.stringMatching(/^aborted: .* cancelled=true$/),
      expect.stringMatching(/^send refused: ResponseSenderError CANCELLED: /),
    ]);
  }
  const queued = () =>
    waitFor(async () => (await metric('nv_inference_pending_request_count', 'slow_int32')) === 1, 30_000, 'the step queued');

  it('HTTP generate_stream closed', async () => {
    await cancelled(async () => {
      const abort = new AbortController();
      const response = fetch(`${served.server.url}/v2/models/queued_pipeline/generate_stream`, {
        method: 'POST',
        body: JSON.stringify({ COUNT: 0, mode: 'wait_abort' }),
        signal: abort.signal,
      })
        .then((r) => r.text())
        .catch(() => 'aborted');
      await queued();
      abort.abort();
      expect(await response).toBe('aborted');
    });
  });

  it('gRPC ModelStreamInfer cancelled', async () => {
    await cancelled(async () => {
      const stream = grpc.streamInfer();
      const ended = (async () => {
        for await (const _ of stream) void _;
      })().catch((e: unknown) => e as Error);
      stream.write(count(0, { mode: 'wait_abort' }, 'c', 'queued_pipeline'));
      await queued();
      stream.cancel();
      expect(await ended).toMatchObject({ grpcCode: GrpcStatus.CANCELLED });
    });
  });

  it('gRPC ModelStreamInfer past its deadline', async () => {
    await cancelled(async () => {
      const call = raw['ModelStreamInfer']!.call(raw, { deadline: Date.now() + 1500 }) as NodeJS.ReadWriteStream & {
        write(m: unknown): boolean;
      };
      const status = new Promise<number>((resolve) => call.on('error', (e: { code: number }) => resolve(e.code)));
      call.on('data', () => undefined);
      call.write({
        model_name: 'queued_pipeline',
        inputs: [{ name: 'COUNT', datatype: 'INT32', shape: [1, 1], contents: { int_contents: [0] } }],
        parameters: { mode: { string_param: 'wait_abort' } },
      });
      await queued();
      expect(await status).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    });
  });
});

describe('a stalled reader', () => {
  it('holds the decoupled step back through the ensemble; what waits between steps is bounded and charged; then everything arrives', async () => {
    const total = 128;
    const bytes = 1 << 20;
    const sentBy = async () => (await log('patient_streamer')).sent;
    const before = await sentBy();
    const accountedBefore = await metric('batchwise_memory_accounted_bytes');
    const call = raw['ModelStreamInfer']!.call(raw) as NodeJS.ReadWriteStream & { write(m: unknown): boolean; end(): void };
    const received: number[] = [];
    call.on('data', (message: { error_message: string; infer_response: { raw_output_contents: Buffer[] } }) => {
      received.push(message.error_message === '' ? message.infer_response.raw_output_contents[0]!.readInt32LE(0) : -1);
    });
    call.pause();
    call.write({
      model_name: 'patient_pipeline',
      inputs: [{ name: 'COUNT', datatype: 'INT32', shape: [1, 1], contents: { int_contents: [total] } }],
      parameters: { bytes: { int64_param: bytes } },
    });
    let last = -1;
    await waitFor(
      async () => {
        const sent = await sentBy();
        const stalled = sent === last;
        last = sent;
        return stalled && sent > before;
      },
      20_000,
      'the decoupled step to stop sending',
    );
    expect(last - before).toBeLessThan(total / 2);
    // The responses between steps and those waiting for the client are charged, and bounded.
    const held = (await metric('batchwise_memory_accounted_bytes')) - accountedBefore;
    expect(held).toBeGreaterThan(4 * bytes);
    expect(held).toBeLessThan(32 * bytes);
    call.resume();
    await waitFor(async () => received.length === total, 20_000, 'every response');
    call.end();
    expect(received).toEqual(Array.from({ length: total }, (_, i) => i));
  });
});
