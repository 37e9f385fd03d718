import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { InferenceService, MemoryReservation } from '../core/index.ts';
import { answerInfer } from './infer-answer.ts';
import { HEADER_LENGTH } from './infer-codec.ts';
// Larger bodies go through fastify, whose preParsing counts a large JSON body's values while it arrives.
import { COUNT_WHILE_RECEIVED_MIN_BYTES } from './json-admission.ts';
import { errorAnswer } from './error-answer.ts';
import { connectionOf, type Connection } from './connection-cancel.ts';

/** fastify's maxParamLength: a longer model name or version is answered by its router (414). */
const MAX_PARAM_LENGTH = 100;

export interface DirectInferOptions {
  readonly logger: Logger;
  /** The largest body accepted (--http-max-input-size); a larger one is refused by fastify's body parser. */
  readonly maxBodyBytes: number;
  /** True once the frontend's close has begun: fastify's hook refuses requests then. */
  readonly closing: () => boolean;
}

/** An infer request's model and version, percent-decoded from its path. */
export interface InferTarget {
  readonly modelName: string;
  readonly modelVersion?: string;
}

/**
 * The infer route's common case (issue 34), served from Node's request event: a body of known
 * length, neither chunked nor compressed, for a ready model that is not decoupled, while the
 * inference API needs no key. fastify's routing, hooks, body parser and reply cost each such request
 * more than everything else the server does for it; what they do for it is done here (the memory
 * reservation from Content-Length, cancellation when the client goes away, Triton's error bodies,
 * `Connection: close` while not ready) with the same code the route uses (answerInfer, errorAnswer).
 * Every other request returns false and is routed by fastify as before.
 */
export function serveInferDirectly(
  service: InferenceService,
  request: IncomingMessage,
  response: ServerResponse,
  target: InferTarget,
  arrivalNs: bigint,
  options: DirectInferOptions,
): boolean {
  const headers = request.headers;
  if (headers['transfer-encoding'] !== undefined || headers['content-encoding'] !== undefined) return false;
  const length = Number(headers['content-length']);
  if (!(length >= 0 && length <= COUNT_WHILE_RECEIVED_MIN_BYTES && length <= options.maxBodyBytes)) return false;
  const { modelName, modelVersion } = target;
  if (modelName.length > MAX_PARAM_LENGTH || (modelVersion?.length ?? 0) > MAX_PARAM_LENGTH) return false;
  if (options.closing() || !service.isModelReady(modelName, modelVersion) || service.isDecoupled(modelName, modelVersion)) return false;

  let memory: MemoryReservation;
  try {
    memory = service.reserveRequestMemory(length, {
      modelName,
      ...(modelVersion !== undefined && { modelVersion }),
      // A body in the binary extension usually asks for binary replies too; a JSON body's default is JSON.
      repliesAsJson: headers[HEADER_LENGTH] === undefined,
    });
  } catch (error) {
    answerError(service, request, response, error, options.logger);
    return true;
  }
  const exchange = new DirectExchange(service, request, response, memory, options.logger);
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.once('end', () => {
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    void exchange.run(body, modelName, modelVersion, arrivalNs);
  });
  return true;
}

/**
 * One request on the direct path, from its body to its reply. Its memory reservation is held until
 * its reply has been taken by the socket (or its connection closed) and its handler has returned;
 * its connection's closing cancels it (connection-cancel.ts).
 */
class DirectExchange {
  private readonly connection: Connection;
  private running = false;
  private closed = false;
  private readonly onClose = (): void => {
    this.closed = true;
    if (!this.running) this.memory.release();
  };

  constructor(
    private readonly service: InferenceService,
    private readonly request: IncomingMessage,
    private readonly response: ServerResponse,
    private readonly memory: MemoryReservation,
    private readonly logger: Logger,
  ) {
    this.connection = connectionOf(request.socket);
    this.connection.onClose.add(this.onClose);
  }

  async run(body: Buffer, model: string, version: string | undefined, arrivalNs: bigint): Promise<void> {
    const { service, response } = this;
    this.running = true;
    try {
      const answer = await answerInfer(service, {
        body,
        headers: this.request.headers,
        model,
        version,
        memory: this.memory,
        json: undefined,
        arrivalNs,
        signal: this.connection.signal,
      });
      if (!this.closed) {
        const headers: Record<string, string | number> = answer.headers;
        headers['content-type'] = answer.contentType;
        headers['content-length'] = answer.payload.length;
        if (!service.isReady()) headers['connection'] = 'close';
        response.writeHead(200, headers);
        response.end(answer.payload);
      }
    } catch (error) {
      if (!this.closed) answerError(service, this.request, response, error, this.logger);
    } finally {
      this.running = false;
      this.settle();
    }
  }

  /** The reply is written: the reservation goes once the socket has taken it, at once for all but large replies to slow readers. */
  private settle(): void {
    const socket = this.request.socket;
    if (this.closed || socket.writableLength === 0) {
      this.connection.onClose.delete(this.onClose);
      this.memory.release();
      return;
    }
    this.response.once('close', () => {
      this.connection.onClose.delete(this.onClose);
      this.memory.release();
    });
  }
}

function answerError(service: InferenceService, request: IncomingMessage, response: ServerResponse, error: unknown, logger: Logger): void {
  if (response.headersSent) return;
  const { status, body } = errorAnswer(error, logger, request.method, request.url);
  const payload = Buffer.from(JSON.stringify(body));
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': payload.length,
    ...(!service.isReady() && { connection: 'close' }),
  });
  response.end(payload);
}
