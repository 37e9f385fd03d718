import { Transform } from 'node:stream';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { InferenceService, MemoryReservation } from '../../core/index.ts';
import { CANARY_KEY_HEADER, Errors, refusalDue, type ObjectiveRefusal } from '../../core/index.ts';
import { COUNT_WHILE_RECEIVED_MIN_BYTES, countJsonWhileReceived } from '../json-admission.ts';
import { HEADER_LENGTH } from '../infer-codec.ts';
import type { JsonArrayCounter } from '../../tensor/json-census.ts';
import { httpStatusOf } from '../status.ts';
import { serveInferDirectly, type DirectInferOptions } from '../direct-infer.ts';
import { answerInfer } from '../infer-answer.ts';
import { connectionOf } from '../connection-cancel.ts';

interface ModelParams {
  model: string;
  version?: string;
}

/**
 * As Triton (the request object is created for a model before its body is parsed): a request
 * for an unknown model or version gets that error whatever its body holds.
 */
export function assertModelResolvable(service: InferenceService, model: string, version: string | undefined): void {
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

/** When each request's headers were read (refuseBeforeRouting): its arrival, for queue timeouts and the latency objective. */
const receivedAt = new WeakMap<IncomingMessage, bigint>();

/** An inference route's path (infer, generate, generate_stream): the model and, if named, the version (percent-encoded as sent). */
const INFER_PATH = /^\/v2\/models\/([^/?#]+)(?:\/versions\/([^/?#]+))?\/(infer|generate|generate_stream)(?:[?#]|$)/;

/** The pre-encoded refusals, one per message (one per model with an objective). */
const refusalBodies = new Map<string, Buffer>();

/** Refusals in a row on a connection, cleared by its next reply that is not a refusal. */
const refusalStreaks = new WeakMap<Socket, number>();

/** The longest a refusal is held, in objectives (the fourth refusal in a row and after). */
const MOST_OBJECTIVES_HELD = 8;

/**
 * When to answer a refusal on a connection that has had `streak` refusals in a row before it:
 * at the request's deadline the first time, then two, four, eight objectives after its arrival.
 * A client that resends a refused request at once would otherwise keep a core busy refusing it
 * (issue 30: 64 clients of a closed loop sent 30,000 requests a second that way); this one waits
 * as a client with backoff would have.
 */
function answerAtNs(refusal: ObjectiveRefusal, receivedNs: bigint, streak: number): bigint {
  const held = Math.min(2 ** streak, MOST_OBJECTIVES_HELD);
  return receivedNs + (refusal.answerAtNs - receivedNs) * BigInt(held);
}

/**
 * Before routing, from the request line and headers alone: a POST to an infer route whose
 * model's latency objective refuses it now is answered here, by Node's own response, with its
 * body unread (issue 30). Under overload such refusals come by the thousand a second from
 * clients that resend at once, and fastify's routing, hooks and reply serialization, or reading
 * and decoding the body, would cost each one several times what it is worth, crowding out the
 * work the objective protects. An admitted infer request is served here too when `direct` allows
 * it (direct-infer.ts). Returns true when it answered or took the request; otherwise notes the
 * request's arrival for the route. Not used while the inference API needs a key (fastify checks it).
 */
export function refuseBeforeRouting(
  service: InferenceService,
  request: IncomingMessage,
  response: ServerResponse,
  direct?: DirectInferOptions,
): boolean {
  const receivedNs = process.hrtime.bigint();
  if (request.method !== 'POST') return false;
  const path = INFER_PATH.exec(request.url ?? '');
  if (!path) return false;
  const canaryKey = request.headers[CANARY_KEY_HEADER];
  // Optional fields only when present, and no decoding of a segment without escapes: this runs for every request.
  const target: { modelName: string; modelVersion?: string; canaryKey?: string } = { modelName: path[1]! };
  try {
    if (target.modelName.includes('%')) target.modelName = decodeURIComponent(target.modelName);
    if (path[2] !== undefined) target.modelVersion = path[2].includes('%') ? decodeURIComponent(path[2]) : path[2];
  } catch {
    receivedAt.set(request, receivedNs);
    return false; // a malformed escape: the router answers it
  }
  if (typeof canaryKey === 'string') target.canaryKey = canaryKey;
  const refusal = service.shedOnArrival(target, receivedNs);
  const socket = request.socket;
  const streak = refusalStreaks.get(socket) ?? 0;
  if (!refusal) {
    // Admitted here, it may still be refused later (the scheduler's own test once it is queued): on a
    // connection already in a streak such a refusal extends it, and a reply that is not a refusal ends
    // it. Other connections (nearly all requests) get no listener on their hot path.
    if (streak > 0) {
      response.once('finish', () => {
        if (response.statusCode === 503) refusalStreaks.set(socket, (refusalStreaks.get(socket) ?? 0) + 1);
        else refusalStreaks.delete(socket);
      });
    }
    if (direct !== undefined && path[3] === 'infer' && serveInferDirectly(service, request, response, target, receivedNs, direct))
      return true;
    receivedAt.set(request, receivedNs);
    return false;
  }
  refusalStreaks.set(socket, streak + 1);
  const answer = () => {
    let body = refusalBodies.get(refusal.error.message);
    if (!body) refusalBodies.set(refusal.error.message, (body = Buffer.from(JSON.stringify({ error: refusal.error.message }))));
    response.writeHead(httpStatusOf(refusal.error.code), {
      'content-type': 'application/json; charset=utf-8',
      'content-length': body.length,
    });
    response.end(body);
  };
  const due = refusalDue({ ...refusal, answerAtNs: answerAtNs(refusal, receivedNs, streak) });
  if (due) void due.then(answer);
  else answer();
  return true;
}

/**
 * Arrival on the route: the time its headers came (refuseBeforeRouting noted it, unless the
 * inference API is restricted: then the objective's refusal is decided here, after the key check).
 */
async function arrive(
  service: InferenceService,
  request: FastifyRequest<{ Params: ModelParams }>,
  reply: FastifyReply,
): Promise<FastifyReply | undefined> {
  if (!receivedAt.has(request.raw)) {
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
    if (refusal) {
      await refusalDue(refusal);
      return reply.code(httpStatusOf(refusal.error.code)).send({ error: refusal.error.message });
    }
  }
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

/** What an inference route's handler has of its request: its memory reservation, its arrival and its cancellation. */
export interface HandledRequest {
  /** Held while the handler runs and until the reply has closed; absent when the body was over the size limit. */
  readonly memory: MemoryReservation | undefined;
  /** Its JSON's values, counted as the body arrived (the infer route's JSON bodies). */
  readonly json: JsonArrayCounter | undefined;
  /** When its headers came (refuseBeforeRouting or arrive). */
  readonly arrivalNs: bigint | undefined;
  /** Aborted when its client goes away before the reply has been sent (its connection closed). */
  readonly signal: AbortSignal;
  /** The handler is done: the reservation goes once the reply has closed too. */
  done(): void;
}

/** Starts a handler of an inference route (infer, generate, generate_stream): call `done` when it returns. */
export function handleRequest(request: FastifyRequest, reply: FastifyReply): HandledRequest {
  const held = heldMemory.get(request.raw);
  if (held) held.handlerRunning = true;
  return {
    memory: held?.reservation,
    json: held?.json,
    arrivalNs: receivedAt.get(request.raw),
    // A client that closes its connection before the reply has gone cancels its request.
    signal: connectionOf(request.raw.socket).signal,
    done: () => {
      if (!held) return;
      held.handlerRunning = false;
      if (held.replyClosed) held.reservation.release();
    },
  };
}

/** What every inference route runs before its handler: arrival (the latency objective), body reservation and counting. */
export function inferenceRouteOptions(service: InferenceService) {
  return {
    config: { apiGroup: 'inference' as const },
    onRequest: async (request: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) => arrive(service, request, reply),
    preParsing: async (request: FastifyRequest, _reply: FastifyReply, payload: NodeJS.ReadableStream) =>
      countJsonPart(request, countStreamedBody(request, payload)),
  };
}

export function registerInferRoutes(app: FastifyInstance, service: InferenceService): void {
  const handler = async (request: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) => {
    assertModelResolvable(service, request.params.model, request.params.version);
    // As Triton's HTTP frontend: a decoupled model's responses come only through generate_stream (and generate).
    if (service.isDecoupled(request.params.model, request.params.version)) throw Errors.decoupledRefused('HTTP end point');
    const handled = handleRequest(request, reply);
    try {
      const answer = await answerInfer(service, {
        body: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
        headers: request.headers,
        model: request.params.model,
        version: request.params.version,
        memory: handled.memory,
        json: handled.json,
        arrivalNs: handled.arrivalNs,
        signal: handled.signal,
      });
      return reply.code(200).headers(answer.headers).type(answer.contentType).send(answer.payload);
    } finally {
      handled.done();
    }
  };
  const options = inferenceRouteOptions(service);
  app.post<{ Params: ModelParams }>('/v2/models/:model/infer', options, handler);
  app.post<{ Params: ModelParams }>('/v2/models/:model/versions/:version/infer', options, handler);
}
