import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Errors, toInferenceServerError, type InferenceService, type StreamEvent } from '../../core/index.ts';
import { decodeGenerateRequest, encodeGenerateError, encodeGenerateResponse } from '../generate-codec.ts';
import { httpStatusOf } from '../status.ts';
import { assertModelResolvable, handleRequest, inferenceRouteOptions } from './infer.ts';

interface ModelParams {
  model: string;
  version?: string;
}

/** Triton's words when `generate` gets other than one response (http_server.cc SendChunkResponse). */
const NOT_ONE_RESPONSE =
  'generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses';

/**
 * Triton's generate extension: `POST /v2/models/{m}[/versions/{v}]/generate` answers one JSON
 * response, `.../generate_stream` a `text/event-stream` with one `data: <json>` event per response
 * as the model sends it. Both serve decoupled models and the others. An error before the first
 * response is a JSON error with its status; once a response went, an error is an event of the
 * stream (and as Triton, the status is the first response's: an error first sets it). A client that
 * closes its connection cancels the request; the next event is written only once the last has been
 * taken by the socket (backpressure).
 */
export function registerGenerateRoutes(app: FastifyInstance, service: InferenceService): void {
  const handler = (streaming: boolean) => async (request: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) => {
    const { model, version } = request.params;
    assertModelResolvable(service, model, version);
    const handled = handleRequest(request, reply);
    try {
      await service.awaitLoad(model);
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const inferRequest = decodeGenerateRequest(body, service.modelMetadata(model, version), model, version);
      let decodedBytes = 0;
      for (const input of inferRequest.inputs) decodedBytes += input.data.byteLength;
      handled.memory?.grow(decodedBytes);
      const events = service
        .inferStream(inferRequest, {
          ...(handled.memory && { memory: handled.memory }),
          ...(handled.arrivalNs !== undefined && { arrivalNs: handled.arrivalNs }),
          signal: handled.signal,
        })
        [Symbol.asyncIterator]();
      // A request refused before it reached its model throws here: a JSON error with its status.
      const first = await events.next();
      if (!streaming) return await sendOne(reply, first, events);
      await sendEvents(reply, first, events);
      return reply;
    } finally {
      handled.done();
    }
  };
  const options = inferenceRouteOptions(service);
  for (const prefix of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    app.post<{ Params: ModelParams }>(`${prefix}/generate`, options, handler(false));
    app.post<{ Params: ModelParams }>(`${prefix}/generate_stream`, options, handler(true));
  }
}

/** `generate`: exactly one response (a flag-only final response does not count), or the first error. */
async function sendOne(reply: FastifyReply, first: IteratorResult<StreamEvent>, events: AsyncIterator<StreamEvent>): Promise<FastifyReply> {
  let answer: string | undefined;
  let count = 0;
  for (let next = first; !next.done; next = await events.next()) {
    const event = next.value;
    if (event.kind === 'error') throw event.error;
    if (event.kind === 'response') {
      count++;
      answer = encodeGenerateResponse(event.response);
    }
  }
  if (count !== 1 || answer === undefined) throw Errors.internal(NOT_ONE_RESPONSE);
  return reply.code(200).type('application/json').send(answer);
}

/** `generate_stream`: Server-Sent Events, written as they come, each once the socket took the last. */
async function sendEvents(reply: FastifyReply, first: IteratorResult<StreamEvent>, events: AsyncIterator<StreamEvent>): Promise<void> {
  const raw = reply.raw;
  const status = !first.done && first.value.kind === 'error' ? httpStatusOf(first.value.error.code) : 200;
  reply.hijack();
  raw.writeHead(status, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  try {
    for (let next = first; !next.done; next = await events.next()) {
      const event = next.value;
      if (event.kind === 'final') continue;
      const data = event.kind === 'response' ? encodeGenerateResponse(event.response) : encodeGenerateError(event.error);
      if (raw.destroyed) break;
      if (!raw.write(`data: ${data}\n\n`)) await drainedOrClosed(raw);
    }
  } catch (error) {
    // A response that cannot be encoded (or a stream that failed) ends the stream with its error: the headers went already.
    if (!raw.destroyed) raw.write(`data: ${encodeGenerateError(toInferenceServerError(error))}\n\n`);
  } finally {
    // Ending the iteration early (the client went away) lets the stream drop what it still holds.
    await events.return?.();
    raw.end();
  }
}

/** Resolves when the socket took what it buffered, or closed. */
function drainedOrClosed(raw: FastifyReply['raw']): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      raw.off('drain', done);
      raw.off('close', done);
      resolve();
    };
    raw.on('drain', done);
    raw.on('close', done);
  });
}
