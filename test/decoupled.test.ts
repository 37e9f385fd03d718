/**
 * Decoupled JavaScript models and cancellation on one real server (issue 31): zero, one and many
 * responses per request over gRPC ModelStreamInfer and HTTP generate_stream, Triton's final-response
 * flag and empty final responses, errors as stream responses that keep the stream open, the refusals
 * of /infer and ModelInfer, the generate endpoints on decoupled and other models, batching, sends
 * after the final response, the final-response timeout, a load refused (a decoupled ONNX model), a
 * reader that stalls, and every cancellation path with its CANCELED count. Ensembles with decoupled
 * steps: decoupled-ensemble.test.ts.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BatchwiseClientError,
  DEFAULT_PROTO_DIR,
  GrpcClient,
  GrpcStatus,
  HttpClient,
  type InferRequest,
  type StreamResponse,
} from '@batchwise/client';
import { DECOUPLED_MODELS, REFUSED_MODELS } from './support/decoupled-models.ts';
import { serveModels, type ServedModels } from './support/server.ts';
import { upstreamClients, type AnyClient } from './support/upstream-grpc.ts';
import { waitFor } from './support/wait-for.ts';
import { readMetric } from './support/metrics.ts';

let served: ServedModels;
let grpc: GrpcClient;
let http: HttpClient;
let raw: AnyClient;
let traceDir: string;

beforeAll(async () => {
  traceDir = await mkdtemp(join(tmpdir(), 'batchwise-decoupled-trace-'));
  served = await serveModels([...DECOUPLED_MODELS, ...REFUSED_MODELS], {
    traceConfig: [`triton,file=${join(traceDir, 'trace.json')}`, 'log-frequency=1'],
  });
  grpc = new GrpcClient({ url: `127.0.0.1:${served.server.grpcPort}` });
  http = served.client;
  raw = upstreamClients(`127.0.0.1:${served.server.grpcPort}`, DEFAULT_PROTO_DIR).inference;
});
afterAll(async () => {
  raw?.close();
  await grpc?.close();
  await served?.close();
  await rm(traceDir, { recursive: true, force: true });
});

const streamer = (count: number, parameters: Record<string, string | number | boolean> = {}, id?: string): InferRequest => ({
  model: 'streamer',
  ...(id !== undefined && { id }),
  inputs: [{ name: 'COUNT', datatype: 'INT32', shape: [1, 1], data: [count] }],
  parameters,
});

/** Every answer of a stream to `requests`, written at once, until `done` (@default each had its final response). */
async function streamAll(
  requests: readonly InferRequest[],
  done = (answers: readonly StreamResponse[]) => answers.filter((a) => a.final).length === requests.length,
): Promise<StreamResponse[]> {
  const stream = grpc.streamInfer();
  for (const r of requests) stream.write(r);
  const answers: StreamResponse[] = [];
  for await (const answer of stream) {
    answers.push(answer);
    if (done(answers)) break;
  }
  stream.end();
  return answers;
}

const n = (answer: StreamResponse) =>
  answer.ok ? Array.from((answer.result.outputs.find((o) => o.name === 'N')?.data ?? []) as Int32Array) : [];
const idOf = (answer: StreamResponse) => (answer.ok ? answer.result.id : answer.id);

describe('gRPC ModelStreamInfer', () => {
  it('zero, one and many responses per request, each with its id and triton_final_response', async () => {
    const answers = await streamAll([
      streamer(0, { triton_enable_empty_final_response: true }, 'zero'),
      streamer(1, {}, 'one'),
      streamer(4, {}, 'many'),
    ]);
    const of = (id: string) => answers.filter((a) => a.ok && a.result.id === id);
    expect(of('zero').map((a) => [n(a), a.final])).toEqual([[[], true]]);
    expect(of('one').map((a) => [n(a), a.final])).toEqual([[[0], true]]);
    expect(of('many').map((a) => [n(a), a.final])).toEqual([
      [[0], false],
      [[1], false],
      [[2], false],
      [[3], true],
    ]);
  });

  it('sends the flag-only final response only to a request that asked for it', async () => {
    // Without it the client sees a's two responses (none final) and nothing at all of b.
    const without = await streamAll(
      [streamer(2, { flag_final: true }, 'a'), streamer(0, {}, 'b'), streamer(3, {}, 'c')],
      (answers) => answers.filter((a) => idOf(a) === 'a').length === 2 && answers.some((a) => idOf(a) === 'c' && a.final),
    );
    expect(without.filter((a) => idOf(a) !== 'c').map((a) => [idOf(a), n(a), a.final])).toEqual([
      ['a', [0], false],
      ['a', [1], false],
    ]);
    const answers = await streamAll([streamer(2, { flag_final: true, triton_enable_empty_final_response: true }, 'a')]);
    expect(answers.map((a) => [n(a), a.final])).toEqual([
      [[0], false],
      [[1], false],
      [[], true],
    ]);
  });

  it('an error in the middle of a request is a stream response, and the stream goes on', async () => {
    const answers = await streamAll([streamer(0, { mode: 'error_mid' }, 'e'), streamer(1, {}, 'after')]);
    const e = answers.filter((a) => idOf(a) === 'e');
    expect(e.map((a) => (a.ok ? n(a) : a.error.message))).toEqual([[0], "model 'streamer': a failure in the middle", [1]]);
    expect(e.map((a) => a.final)).toEqual([false, false, true]);
    expect(answers.some((a) => a.ok && a.result.id === 'after')).toBe(true);
  });

  it('refuses a non-boolean triton_enable_empty_final_response in Triton words', async () => {
    const [answer] = await streamAll([streamer(1, { triton_enable_empty_final_response: 'yes' }, 'x')]);
    expect(answer).toMatchObject({ ok: false, id: 'x', final: true });
    expect((answer as { error: Error }).error.message).toBe(
      "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.",
    );
  });

  it('streamResponses yields a request’s responses and ends at its final one', async () => {
    const got: number[] = [];
    for await (const result of grpc.streamResponses(streamer(3, { flag_final: true })))
      got.push(...(result.outputs[0]!.data as Int32Array));
    expect(got).toEqual([0, 1, 2]);
    await expect(async () => {
      for await (const _ of grpc.streamResponses(streamer(0, { mode: 'error_final' })));
    }).rejects.toThrow("model 'streamer': a failure at the end");
  });

  it('unary ModelInfer and HTTP /infer refuse a decoupled model in Triton words', async () => {
    const grpcError = await grpc.infer(streamer(1)).catch((e: unknown) => e as BatchwiseClientError);
    expect(grpcError).toMatchObject({ grpcCode: GrpcStatus.UNIMPLEMENTED });
    expect((grpcError as Error).message).toBe("ModelInfer RPC doesn't support models with decoupled transaction policy");
    const httpError = await http.infer(streamer(1)).catch((e: unknown) => e as BatchwiseClientError);
    expect(httpError).toMatchObject({ httpStatus: 501 });
    expect((httpError as Error).message).toBe("HTTP end point doesn't support models with decoupled transaction policy");
  });
});

describe('HTTP generate and generate_stream', () => {
  it('generate_stream: one SSE event per response', async () => {
    const response = await fetch(`${served.server.url}/v2/models/streamer/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ id: '7', COUNT: 3, bytes: 2 }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(await response.text()).toBe(
      'data: {"model_name":"streamer","model_version":"1","id":"7","N":0,"DATA":[0,0]}\n\n' +
        'data: {"model_name":"streamer","model_version":"1","id":"7","N":1,"DATA":[1,1]}\n\n' +
        'data: {"model_name":"streamer","model_version":"1","id":"7","N":2,"DATA":[2,2]}\n\n',
    );
  });

  it('generateStream, an error in the stream as an event, an error before it as JSON', async () => {
    const got: unknown[] = [];
    for await (const r of http.generateStream('streamer', { COUNT: 2 })) got.push(r['N']);
    expect(got).toEqual([0, 1]);
    const mid = await fetch(`${served.server.url}/v2/models/streamer/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ COUNT: 0, mode: 'error_mid' }),
    });
    expect(mid.status).toBe(200);
    expect((await mid.text()).split('\n\n').filter(Boolean)).toEqual([
      'data: {"model_name":"streamer","model_version":"1","N":0,"DATA":[]}',
      `data: {"error":"model 'streamer': a failure in the middle"}`,
      'data: {"model_name":"streamer","model_version":"1","N":1,"DATA":[]}',
    ]);
    const bad = await fetch(`${served.server.url}/v2/models/streamer/generate_stream`, { method: 'POST', body: '{"COUNT": "x"}' });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await bad.json()) as { error: string }).error).toMatch(/COUNT/);
  });

  it('generate: one response, from a decoupled model or any other', async () => {
    expect(await http.generate('streamer', { COUNT: 1, id: 'g' })).toEqual({
      model_name: 'streamer',
      model_version: '1',
      id: 'g',
      N: 0,
      DATA: [],
    });
    expect(await http.generate('echo', { X: [1, 2, 3] })).toEqual({ model_name: 'echo', model_version: '1', Y: [2, 3, 4] });
    const many = await http.generate('streamer', { COUNT: 2 }).catch((e: unknown) => e as BatchwiseClientError);
    expect(many).toMatchObject({ httpStatus: 500 });
    expect((many as Error).message).toMatch(/^generate expects model to produce exactly 1 response/);
    const got: unknown[] = [];
    for await (const r of http.generateStream('echo', { X: 5 })) got.push(r['Y']);
    expect(got).toEqual([6]);
  });
});

describe('decoupled models', () => {
  it('batch as other models: requests that arrive together share one execute()', async () => {
    const answers = await streamAll([1, 2, 3, 4].map((i) => streamer(0, { mode: 'batch' }, String(i))));
    expect(Math.max(...answers.map((a) => n(a)[0]!))).toBeGreaterThan(1);
  });

  it('a send after the final response fails in model code with a clear error', async () => {
    await streamAll([streamer(0, { mode: 'after_final' }, 'af')]);
    expect((await notes()).notes).toContain(
      "send refused: cannot send a response for request 'af' of model 'streamer': its final response was already sent",
    );
  });

  it("a request that never sends its final flag ends at the model's timeout, and the instance keeps serving", async () => {
    const answers = await streamAll([streamer(0, { mode: 'hang' }, 'h'), streamer(2, {}, 'next')]);
    const hung = answers.filter((a) => idOf(a) === 'h');
    expect(hung.map((a) => (a.ok ? n(a) : a.error.message))).toEqual([
      [0],
      "model 'streamer': request 'h' sent no final response within 400 ms (parameter batchwise_final_response_timeout_ms); it was ended",
    ]);
    expect(hung.at(-1)!.final).toBe(true);
    expect(answers.filter((a) => idOf(a) === 'next').map(n)).toEqual([[0], [1]]);
    const after = await streamAll([streamer(1, {}, 'later')]);
    expect(after.map(n)).toEqual([[0]]);
  });

  it('load refused: a decoupled model of another backend, and one with the response cache (as Triton refuses it)', async () => {
    const index = await http.repositoryIndex();
    const reason = (name: string) => index.find((m) => m.name === name)?.reason ?? '';
    expect(reason('decoupled_onnx')).toContain("model 'decoupled_onnx': model_transaction_policy { decoupled: true } needs");
    expect(reason('cached_streamer')).toContain(
      "Response Cache does not currently support model cached_streamer with 'decoupled' transaction policy. Please disable the response cache.",
    );
  });

  it("a reader that stalls: the model's send waits, the server holds a bounded amount, then everything arrives", async () => {
    // 1 MiB responses: the worker's window (8), the acknowledgements' lag (4) and what HTTP/2 and the sockets hold
    // stop the model after some tens of them (24-39 seen), well before all.
    const count = 96;
    const bytes = 1 << 20;
    const { sent: before } = await notes(PATIENT);
    const call = raw['ModelStreamInfer']!.call(raw) as NodeJS.ReadWriteStream & { cancel(): void; write(m: unknown): boolean; end(): void };
    const received: number[] = [];
    call.on('data', (message: { error_message: string; infer_response: { raw_output_contents: Buffer[] } }) => {
      received.push(message.error_message === '' ? message.infer_response.raw_output_contents[0]!.readInt32LE(0) : -1);
    });
    // A failed assertion leaves the call open until the server stops: its error then is not this test's.
    call.on('error', () => undefined);
    call.pause();
    call.write(encodeStreamer(PATIENT, count, { bytes }));
    // The model sends until its unsent responses and the transport's buffers are full, then waits.
    let last = -1;
    await waitFor(
      async () => {
        const { sent } = await notes(PATIENT);
        const stalled = sent === last;
        last = sent;
        return stalled && sent > before;
      },
      20_000,
      'the model to stop sending',
    );
    expect(last - before).toBeLessThan((count * 3) / 4);
    const accounted = await metric('batchwise_memory_accounted_bytes');
    expect(accounted).toBeLessThan(24 * bytes);
    call.resume();
    await waitFor(async () => received.length === count, 20_000, 'every response');
    call.end();
    expect(received).toEqual(Array.from({ length: count }, (_, i) => i));
    expect((await notes(PATIENT)).sent - before).toBe(count);
  });
});

describe('a response the memory budget cannot hold', () => {
  const MiB = 1 << 20;
  let small: ServedModels;
  let client: GrpcClient;
  beforeAll(async () => {
    small = await serveModels(
      // The default final-response timeout: filling a response of a hundred megabytes may take a busy machine past streamer's 400 ms.
      DECOUPLED_MODELS.filter((m) => m.name === PATIENT),
      { memoryLimit: String(process.memoryUsage.rss() + 160 * MiB) },
    );
    client = new GrpcClient({ url: `127.0.0.1:${small.server.grpcPort}` });
  });
  afterAll(async () => {
    await client?.close();
    await small?.close();
  });

  const answersTo = async (request: InferRequest) => {
    const answers: StreamResponse[] = [];
    const stream = client.streamInfer();
    stream.write(request);
    for await (const answer of stream) {
      answers.push(answer);
      if (answer.final) break;
    }
    stream.end();
    return answers.map((a) => (a.ok ? `ok ${n(a).join()}` : `error ${a.error.message}`));
  };

  it('ends its request with the memory error, whether it was the final response or the final flag followed it at once; the server serves on', async () => {
    // One response a little larger than the room the budget leaves is refused (the requests themselves are admitted).
    const metric = (name: string) => readMetric(small.server.metricsPort, name);
    const room = (await metric('batchwise_memory_budget_bytes')) - (await metric('batchwise_memory_baseline_bytes'));
    expect(room).toBeGreaterThan(32 * MiB);
    const bytes = room + 16 * MiB;
    /** The answers, each refusal as the bytes it would have admitted. */
    const refusals = async (request: InferRequest) =>
      (await answersTo(request)).map((a) => {
        const refused = /^error .*server is over its memory budget: admitting this request \((\d+) more bytes\)/.exec(a);
        return refused ? Number(refused[1]) >= bytes : a;
      });
    // The final response itself (it had crashed the server: an unhandled rejection).
    expect(await refusals({ ...streamer(1, { bytes }), model: PATIENT })).toEqual([true]);
    // A response, and the final flag sent in the same turn (it had ended the stream as a success, empty).
    expect(await refusals({ ...streamer(1, { bytes, flag_final: true }), model: PATIENT })).toEqual([true]);
    // Up and answering (the budget itself may stay short a while: the refused buffers are still in its process's memory).
    expect(await client.isServerLive()).toBe(true);
    expect(await client.isModelReady(PATIENT)).toBe(true);
  });
});

describe('cancellation from every protocol, counted CANCELED', () => {
  const SLOW = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] };

  it('HTTP /infer connection closed: the queued ONNX request leaves its queue and never runs', async () => {
    const before = await counts('slow');
    const abort = new AbortController();
    const sent = fetch(`${served.server.url}/v2/models/slow/infer`, {
      method: 'POST',
      body: JSON.stringify(SLOW),
      signal: abort.signal,
    }).catch(() => 'aborted');
    await waitFor(async () => (await metric('nv_inference_pending_request_count', 'slow')) === 1, 10_000, 'the request queued');
    abort.abort();
    expect(await sent).toBe('aborted');
    await waitFor(async () => (await counts('slow')).canceled === before.canceled + 1, 10_000, 'CANCELED counted');
    const after = await counts('slow');
    expect(after).toMatchObject({ pending: 0, executions: before.executions, failures: before.failures + 1 });
  });

  it('gRPC ModelInfer cancelled: the queued request leaves its queue', async () => {
    const before = await counts('slow');
    const call = (raw['ModelInfer'] as Function).call(
      raw,
      { model_name: 'slow', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], contents: { fp32_contents: [1, 2, 3, 4] } }] },
      () => undefined,
    ) as { cancel(): void };
    await waitFor(async () => (await metric('nv_inference_pending_request_count', 'slow')) === 1, 10_000, 'the request queued');
    call.cancel();
    await waitFor(async () => (await counts('slow')).canceled === before.canceled + 1, 10_000, 'CANCELED counted');
    expect(await counts('slow')).toMatchObject({ pending: 0, executions: before.executions });
  });

  it('gRPC ModelInfer past its deadline: DEADLINE_EXCEEDED for the client, the queued request leaves its queue, counted CANCELED', async () => {
    const before = await counts('slow');
    const answered = new Promise<{ code: number }>((resolve) =>
      (raw['ModelInfer'] as Function).call(
        raw,
        { model_name: 'slow', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], contents: { fp32_contents: [1, 2, 3, 4] } }] },
        { deadline: Date.now() + 300 },
        (error: { code: number } | null) => resolve(error ?? { code: 0 }),
      ),
    );
    await waitFor(async () => (await metric('nv_inference_pending_request_count', 'slow')) === 1, 10_000, 'the request queued');
    expect((await answered).code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    await waitFor(async () => (await counts('slow')).canceled === before.canceled + 1, 10_000, 'CANCELED counted');
    expect(await counts('slow')).toMatchObject({ pending: 0, executions: before.executions });
  });

  it('SSE closed: the running request sees its signal, its send is refused, its inferModel call leaves its queue', async () => {
    const [streamerBefore, slowBefore] = [await counts('streamer'), await counts('slow')];
    for await (const first of http.generateStream('streamer', { COUNT: 0, mode: 'wait_abort', call: true, id: 'sse' })) {
      expect(first['N']).toBe(0);
      await waitFor(async () => (await metric('nv_inference_pending_request_count', 'slow')) === 1, 10_000, 'the call queued');
      break; // closes the connection
    }
    await waitFor(async () => (await counts('streamer')).canceled === streamerBefore.canceled + 1, 10_000, 'CANCELED counted');
    await waitFor(async () => (await counts('slow')).canceled === slowBefore.canceled + 1, 10_000, 'the call CANCELED');
    const { notes: noted } = await notes();
    expect(noted).toEqual([
      "call CANCELLED: the call to model 'slow' was cancelled (its signal aborted)",
      "aborted: cannot send a response for request 'sse' of model 'streamer': Request was cancelled: its client went away cancelled=true",
      "send refused: ResponseSenderError CANCELLED: cannot send a response for request 'sse' of model 'streamer': Request was cancelled: its client went away",
    ]);
    expect(await counts('slow')).toMatchObject({ pending: 0, executions: slowBefore.executions });
  });

  it("SSE closed: a call made with model code's own signal is cancelled when model code aborts it", async () => {
    const slowBefore = await counts('slow');
    for await (const first of http.generateStream('streamer', { COUNT: 0, mode: 'wait_abort', call: true, own_signal: true, id: 'own' })) {
      expect(first['N']).toBe(0);
      await waitFor(async () => (await metric('nv_inference_pending_request_count', 'slow')) === 1, 10_000, 'the call queued');
      break;
    }
    await waitFor(async () => (await counts('slow')).canceled === slowBefore.canceled + 1, 10_000, 'the call CANCELED');
    expect((await notes()).notes[0]).toBe("call CANCELLED: the call to model 'slow' was cancelled (its signal aborted)");
    expect(await counts('slow')).toMatchObject({ pending: 0, executions: slowBefore.executions });
  });

  it('gRPC stream cancelled: its running request sees its signal', async () => {
    const before = await counts('streamer');
    const stream = grpc.streamInfer();
    stream.write(streamer(0, { mode: 'wait_abort' }, 'grpc'));
    for await (const answer of stream) {
      expect(n(answer)).toEqual([0]);
      break;
    }
    stream.cancel();
    await waitFor(async () => (await counts('streamer')).canceled === before.canceled + 1, 10_000, 'CANCELED counted');
    expect((await notes()).notes[0]).toMatch(/^aborted: .*request 'grpc'.* cancelled=true$/);
  });

  it('a client that goes away after the final response, before the batch returned: counted a success, not CANCELED', async () => {
    const before = { ...(await counts('streamer')), successes: await successes('streamer') };
    const stream = grpc.streamInfer();
    stream.write(streamer(2, { hold_ms: 400 }, 'gone'));
    const seen: number[][] = [];
    for await (const answer of stream) {
      seen.push(n(answer));
      if (answer.final) break;
    }
    stream.cancel();
    expect(seen).toEqual([[0], [1]]);
    await waitFor(async () => (await successes('streamer')) === before.successes + 1, 10_000, 'the success counted');
    expect(await counts('streamer')).toMatchObject({ canceled: before.canceled, failures: before.failures });
  });

  it('HTTP /infer connection closed while a JavaScript request runs: it sees its signal, counted CANCELED', async () => {
    const before = await counts('echo');
    const abort = new AbortController();
    const body = { inputs: [{ name: 'X', datatype: 'INT32', shape: [1, 1], data: [1] }], parameters: { mode: 'wait_abort' } };
    const sent = fetch(`${served.server.url}/v2/models/echo/infer`, {
      method: 'POST',
      body: JSON.stringify(body),
      signal: abort.signal,
    }).catch(() => 'aborted');
    const slowBefore = await counts('slow');
    // Running: its call to slow waits in slow's queue.
    await waitFor(async () => (await metric('nv_inference_pending_request_count', 'slow')) === 1, 10_000, 'the call queued');
    abort.abort();
    expect(await sent).toBe('aborted');
    // echo answers only once its signal aborted: the count proves model code saw it; its call was cancelled too.
    await waitFor(async () => (await counts('echo')).canceled === before.canceled + 1, 10_000, 'CANCELED counted');
    await waitFor(async () => (await counts('slow')).canceled === slowBefore.canceled + 1, 10_000, 'the call CANCELED');
  });

  it('a cancelled request is visible in the trace file', async () => {
    await postJson('/v2/models/slow/trace/setting', { trace_level: ['TIMESTAMPS'], trace_rate: '1' });
    const abort = new AbortController();
    const sent = fetch(`${served.server.url}/v2/models/slow/infer`, {
      method: 'POST',
      body: JSON.stringify({ id: 'traced', ...SLOW }),
      signal: abort.signal,
    }).catch(() => 'aborted');
    await waitFor(async () => (await metric('nv_inference_pending_request_count', 'slow')) === 1, 10_000, 'the request queued');
    abort.abort();
    await sent;
    let traced: { request_id: string; error?: { code: string } } | undefined;
    await waitFor(
      async () => {
        const files = await readFile(join(traceDir, 'trace.json.0'), 'utf8').catch(() => '[]');
        traced = (JSON.parse(files) as (typeof traced)[]).find((t) => t?.request_id === 'traced');
        return traced !== undefined;
      },
      10_000,
      'the trace written',
    );
    expect(traced!.error).toEqual({ code: 'CANCELLED', message: 'Request was cancelled: its client went away' });
    await postJson('/v2/models/slow/trace/setting', { trace_level: ['OFF'] });
  });
});

async function postJson(path: string, body: unknown): Promise<void> {
  const response = await fetch(`${served.server.url}${path}`, { method: 'POST', body: JSON.stringify(body) });
  expect(response.status).toBe(200);
}

/** The streamer whose requests wait for their final response as long as the default timeout. */
const PATIENT = 'patient_streamer';

/** A streamer's notes (cleared as read) and how many responses its `count` requests sent in all. */
async function notes(model = 'streamer'): Promise<{ notes: string[]; sent: number }> {
  for await (const result of grpc.streamResponses({ ...streamer(0, { mode: 'log' }), model })) {
    const data = result.outputs.find((o) => o.name === 'DATA')!.data as Uint8Array;
    return JSON.parse(Buffer.from(data).toString()) as { notes: string[]; sent: number };
  }
  throw new Error('no log');
}

/** A streamer request as raw ModelStreamInfer wire (grpc-js, our protos): COUNT, and parameters. */
function encodeStreamer(model: string, count: number, parameters: Record<string, number>) {
  return {
    model_name: model,
    inputs: [{ name: 'COUNT', datatype: 'INT32', shape: [1, 1], contents: { int_contents: [count] } }],
    parameters: Object.fromEntries(Object.entries(parameters).map(([k, v]) => [k, { int64_param: v }])),
  };
}

/** One sample of /metrics: the metric, of `model` when given. */
function metric(name: string, model?: string, labels = ''): Promise<number> {
  return readMetric(served.server.metricsPort, name, model, labels);
}

const successes = async (model: string) => (await http.modelStatistics(model))[0]!.inference_stats.success.count;

/** A model's CANCELED failures (metric), failures and executions (statistics) and pending requests. */
async function counts(model: string) {
  const stats = (await http.modelStatistics(model))[0]!;
  return {
    canceled: await metric('nv_inference_request_failure', model, 'reason="CANCELED"'),
    failures: stats.inference_stats.fail.count,
    executions: stats.execution_count,
    pending: await metric('nv_inference_pending_request_count', model),
  };
}
