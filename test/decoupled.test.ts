/**
 * Decoupled JavaScript models on one real server (issue 31): zero, one and many responses per
 * request over gRPC ModelStreamInfer and HTTP generate_stream, Triton's final-response flag and
 * empty final responses, errors as stream responses that keep the stream open, the refusals of
 * /infer and ModelInfer, the generate endpoints on decoupled and other models, sends after the final
 * response, the final-response timeout, and loads refused (a decoupled ONNX model, an ensemble step).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, GrpcStatus, HttpClient, type InferRequest, type StreamResponse } from '@batchwise/client';
import { DECOUPLED_MODELS } from './support/decoupled-models.ts';
import { serveModels, type ServedModels } from './support/server.ts';

let served: ServedModels;
let grpc: GrpcClient;
let http: HttpClient;

beforeAll(async () => {
  served = await serveModels(DECOUPLED_MODELS);
  grpc = new GrpcClient({ url: `127.0.0.1:${served.server.grpcPort}` });
  http = served.client;
});
afterAll(async () => {
  await grpc?.close();
  await served?.close();
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
    expect((await bad.json()).error).toMatch(/COUNT/);
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
