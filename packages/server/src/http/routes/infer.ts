import { Transform } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { InferenceService, MemoryReservation } from '../../core/index.ts';
import { CANARY_KEY_HEADER } from '../../core/index.ts';
import { decodeHttpInferRequest, encodeHttpInferResponse, outputsSentAsJson } from '../infer-codec.ts';
import { admitJsonBody, countJsonWhileReceived } from '../json-admission.ts';
import type { JsonArrayCounter } from '../../tensor/json-census.ts';
import { compressResponse, COMPRESSION_THRESHOLD_BYTES, negotiateResponseEncoding } from '../response-compression.ts';
import { httpStatusOf } from '../status.ts';

interface ModelParams {
  model: string;
  version?: string;
}

const HEADER_LENGTH = 'inference-header-content-length';

/**
 * As Triton (the request object is created for a model before its body is parsed): a request
 * for an unknown model or version gets that error whatever its body holds.
 */
function assertModelResolvable(service: InferenceService, model: string, version: string | undefined): void {
  // Throws the unknown-model, unknown-version or not-ready error; the ready path costs one lookup. A
  // model that a request loads (--load-on-demand) is waited for by infer().
  if (!service.isModelReady(model, version) && !service.awaitsLoad(model)) service.modelMetadata(model, version);
}

/**
 * A request's memory reservation: its body from admission on, then what infer adds. Released
 * once its reply has closed (sent, failed or aborted) and its handler, if it ran, has returned.
 */
interface HeldMemory {
  readonly reservation: MemoryReservation;
  /** Body bytes charged so far (the Content-Length, or what a chunked or compressed body streamed). */
  bodyBytes: number;
  handlerRunning: boolean;
  replyClosed: boolean;
  /** The values of the body's JSON, counted as it arrives. */
  json?: JsonArrayCounter;
}

const heldMemory = new WeakMap<IncomingMessage, HeldMemory>();

/** When each request's headers were read: its arrival, for queue timeouts and the latency objective. */
const receivedAt = new WeakMap<IncomingMessage, bigint>();

/**
 * Arrival: the request's time is taken from its headers, and a model whose latency objective would
 * refuse it now refuses it before its body is read or decoded (issue 30): under overload a refusal
 * must cost the event loop less than serving, or refusals crowd out the work they protect.
 */
function arrive(
  service: InferenceService,
  request: FastifyRequest<{ Params: ModelParams }>,
  reply: FastifyReply,
): FastifyReply | undefined {
  const receivedNs = process.hrtime.bigint();
  receivedAt.set(request.raw, receivedNs);
  const canaryKey = request.headers[CANARY_KEY_HEADER];
  const refusal = service.shedOnArrival(
    {
      modelName: request.params.model,
      ...(request.params.version !== undefined && { modelVersion: request.params.version }),
      ...(typeof canaryKey === 'string' && { canaryKey }),
    },
    receivedNs,
  );
  if (refusal) return reply.code(httpStatusOf(refusal.code)).send({ error: refusal.message });
  reserveBody(service, request, reply);
  return undefined;
}

/**
 * Admission: the body is charged from its Content-Length before it is read, so bodies that
 * would exceed the memory budget get 503 unread. A body over the size limit is left to the
 * body parser's refusal (400, in Triton's words).
 */
function reserveBody(service: InferenceService, request: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply): void {
  const declared = Number(request.headers['content-length']);
  const length = Number.isSafeInteger(declared) && declared > 0 ? declared : 0;
  if (length > request.routeOptions.bodyLimit) return;
  const reservation = service.reserveRequestMemory(length, {
    modelName: request.params.model,
    ...(request.params.version !== undefined && { modelVersion: request.params.version }),
    // A body in the binary extension usually asks for binary replies too; a JSON body's default is JSON.
    repliesAsJson: request.headers[HEADER_LENGTH] === undefined,
  });
  const held: HeldMemory = { reservation, bodyBytes: length, handlerRunning: false, replyClosed: false };
  heldMemory.set(request.raw, held);
  reply.raw.once('close', () => {
    held.replyClosed = true;
    if (!held.handlerRunning) held.reservation.release();
  });
}

/**
 * A body without Content-Length (chunked), or compressed (decoded bytes are what is held), is
 * charged as it streams: the chunk that would exceed the budget fails the request with 503.
 */
function countStreamedBody(request: FastifyRequest, payload: NodeJS.ReadableStream): NodeJS.ReadableStream {
  const held = heldMemory.get(request.raw);
  const exact = request.headers['content-length'] !== undefined && request.headers['content-encoding'] === undefined;
  if (!held || exact) return payload;
  let received = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      try {
        if (received > held.bodyBytes) {
          held.reservation.grow(received - held.bodyBytes);
          held.bodyBytes = received;
        }
        callback(null, chunk);
      } catch (error) {
        callback(error as Error);
      }
    },
  });
  payload.on('error', (error) => counted.destroy(error));
  // fastify compares Content-Length with the encoded bytes content-encoding.ts counts, when present.
  Object.defineProperty(counted, 'receivedEncodedLength', {
    get: () => (payload as { receivedEncodedLength?: number }).receivedEncodedLength,
  });
  return payload.pipe(counted);
}

/**
 * Uncompressed bodies whose Content-Length is at most this are counted in one pass once complete
 * (under a millisecond) rather than through a counting stream, which costs every request its setup.
 */
const COUNT_WHILE_RECEIVED_MIN_BYTES = 256 * 1024;

/** Counts the values of the body's JSON part as it arrives (json-admission.ts); a raw binary body (header length 0) has none, and a malformed header length is refused by the decoder. */
function countJsonPart(request: FastifyRequest, payload: NodeJS.ReadableStream): NodeJS.ReadableStream {
  const held = heldMemory.get(request.raw);
  const header = request.headers[HEADER_LENGTH];
  const value = Array.isArray(header) ? header[0] : header;
  const jsonBytes = value === undefined ? undefined : /^\s*\d+\s*$/.test(value) ? Number(value) : 0;
  if (!held || jsonBytes === 0) return payload;
  const plainLength = request.headers['content-length'] !== undefined && request.headers['content-encoding'] === undefined;
  if (plainLength && held.bodyBytes <= COUNT_WHILE_RECEIVED_MIN_BYTES) return payload;
  const { stream, counter } = countJsonWhileReceived(payload, jsonBytes);
  held.json = counter;
  return stream;
}

export function registerInferRoutes(app: FastifyInstance, service: InferenceService): void {
  const handler = async (request: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) => {
    assertModelResolvable(service, request.params.model, request.params.version);
    const held = heldMemory.get(request.raw);
    if (held) held.handlerRunning = true;
    try {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const headerLength = request.headers[HEADER_LENGTH];
      const { model, version } = request.params;
      const target = { modelName: model, ...(version !== undefined && { modelVersion: version }) };
      const inferRequest = decodeHttpInferRequest(
        body,
        Array.isArray(headerLength) ? headerLength[0] : headerLength,
        model,
        version,
        held && ((json) => admitJsonBody(service, held.reservation, target, json, held.json)),
      );
      if (held) {
        // Inputs sent as JSON are decoded into arrays of their own, beside the body.
        let decodedBytes = 0;
        for (const input of inferRequest.inputs) if (input.data.buffer !== body.buffer) decodedBytes += input.data.byteLength;
        held.reservation.grow(decodedBytes);
      }
      const traceparent = request.headers.traceparent;
      const tracestate = request.headers.tracestate;
      const canaryKey = request.headers[CANARY_KEY_HEADER];
      const keyed = typeof canaryKey === 'string' ? { ...inferRequest, canaryKey } : inferRequest;
      const traced =
        typeof traceparent === 'string'
          ? { ...keyed, traceContext: { traceparent, ...(typeof tracestate === 'string' && { tracestate }) } }
          : keyed;
      const arrivalNs = receivedAt.get(request.raw);
      const response = await service.infer(traced, {
        ...(held && { memory: held.reservation }),
        sentAsJson: outputsSentAsJson(inferRequest),
        ...(arrivalNs !== undefined && { arrivalNs }),
      });
      const encoded = encodeHttpInferResponse(response, inferRequest);
      // Mode opentelemetry: the request's own span, so that a client can find its trace.
      if (response.traceparent !== undefined) void reply.header('traceparent', response.traceparent);
      // Inference-Header-Content-Length counts the JSON before compression, as Triton's does.
      if (encoded.headerLength !== undefined) void reply.header('Inference-Header-Content-Length', encoded.headerLength);
      let payload = encoded.chunks.length === 1 ? encoded.chunks[0]! : Buffer.concat(encoded.chunks);
      const encoding =
        payload.length >= COMPRESSION_THRESHOLD_BYTES ? negotiateResponseEncoding(request.headers['accept-encoding']) : undefined;
      if (encoding !== undefined) {
        payload = await compressResponse(encoding, payload);
        void reply.header('content-encoding', encoding);
      }
      return reply.code(200).type(encoded.contentType).send(payload);
    } finally {
      if (held) {
        held.handlerRunning = false;
        if (held.replyClosed) held.reservation.release();
      }
    }
  };
  const options = {
    config: { apiGroup: 'inference' as const },
    onRequest: async (request: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) => arrive(service, request, reply),
    preParsing: async (request: FastifyRequest, _reply: FastifyReply, payload: NodeJS.ReadableStream) =>
      countJsonPart(request, countStreamedBody(request, payload)),
  };
  app.post<{ Params: ModelParams }>('/v2/models/:model/infer', options, handler);
  app.post<{ Params: ModelParams }>('/v2/models/:model/versions/:version/infer', options, handler);
}
