import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { Metadata, status } from '@grpc/grpc-js';
import { decompress } from './compression.ts';
import { MAX_TIMER_MS, parseGrpcTimeout } from './grpc-timeout.ts';
import { MessageReader, PREFIX_BYTES, type MessageSink } from './message-framing.ts';
import { giveBackAbortController, takeAbortController } from './signal-pool.ts';
import { OK_TRAILERS, RESPONSE_HEADERS, trailersOf, trailersOnlyOf, type CallStatus } from './trailers.ts';

/** A unary RPC: called once the call's one request message has arrived and the client half-closed. */
export interface UnaryMethod {
  readonly streaming: false;
  handle(call: ServerCall, message: Buffer): void;
}

/** A bidirectional streaming RPC: called when the call starts; it sets the call's `on*` hooks. */
export interface StreamingMethod {
  readonly streaming: true;
  handle(call: ServerCall): void;
}

export type MethodHandler = UnaryMethod | StreamingMethod;

export interface CallLimits {
  /** Largest message received, bytes (after decompression). */
  readonly maxReceiveBytes: number;
  /** Largest message sent, bytes (without its prefix). */
  readonly maxSendBytes: number;
}

/** Request headers that are the transport's, not the call's metadata (grpc-js leaves them out too). */
const TRANSPORT_HEADERS = ['grpc-timeout', 'grpc-encoding', 'grpc-accept-encoding', 'accept-encoding', 'te', 'content-type'];

const WAIT_FOR_TRAILERS = Object.freeze({ waitForTrailers: true, sendDate: false });
const END_STREAM = Object.freeze({ endStream: true, sendDate: false });

/** The call of a stream, for the stream's event listeners (shared functions, no closure per call). */
const CALL = Symbol('grpc call');
type CallStream = ServerHttp2Stream & { [CALL]: ServerCall };

/** A message waiting for its turn (the call paused, or a message before it still decompressing), or the half close. */
interface InboxEntry {
  message: Buffer | undefined;
  readonly halfClose: boolean;
}

/**
 * One gRPC call on one HTTP/2 stream, as a handler sees it: the request's headers (custom metadata
 * among them), its cancellation, and the response: headers, messages, status in trailers (or one
 * trailers-only HEADERS frame when nothing was sent before).
 *
 * Reading: DATA chunks are cut into messages (MessageReader), decompressed when flagged, and handed
 * on in order: a unary call's one message to its method at the half close, a streaming call's each
 * to `onMessage`. Ending: the first status wins; a call ends when its handler ends it, when the
 * transport fails it (a message over the limit, one it cannot decompress, a deadline passed: the
 * status is sent, then the call is cancelled), or when the client cancels it (RST_STREAM, or its
 * connection gone before the status went: cancelled, nothing sent).
 */
export class ServerCall implements MessageSink {
  /** The request's HTTP/2 headers; custom metadata are those not reserved (`:`-pseudo, `grpc-`, content-type, te). */
  readonly headers: IncomingHttpHeaders;
  /** `/<package.Service>/<Method>`. */
  readonly path: string;
  /** Streaming calls: each request message in order. */
  onMessage: ((message: Buffer) => void) | undefined = undefined;
  /** Streaming calls: the client sent its last message. */
  onHalfClose: (() => void) | undefined = undefined;
  /** Streaming calls: the response may be written again after `write` returned false. */
  onDrain: (() => void) | undefined = undefined;
  /** Called once when the call is cancelled (by its client, its deadline, or a transport failure). */
  onCancel: (() => void) | undefined = undefined;

  readonly #stream: CallStream;
  readonly #method: MethodHandler;
  readonly #limits: CallLimits;
  #reader: MessageReader | undefined = undefined;
  /** Set once a status is sent (or the call is cancelled): nothing more goes out. */
  #ended = false;
  #cancelled = false;
  #headersSent = false;
  #trailers: OutgoingHttpHeaders = OK_TRAILERS;
  #deadline: NodeJS.Timeout | undefined = undefined;
  #controller: AbortController | undefined = undefined;
  #metadata: Metadata | undefined = undefined;
  /** A unary call's request message, once read. */
  #message: Buffer | undefined = undefined;
  #paused = false;
  #inbox: InboxEntry[] | undefined = undefined;

  constructor(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, path: string, method: MethodHandler, limits: CallLimits) {
    this.headers = headers;
    this.path = path;
    this.#method = method;
    this.#limits = limits;
    const callStream = stream as CallStream;
    callStream[CALL] = this;
    this.#stream = callStream;
    callStream.on('aborted', onAborted);
    // Read from the start, whatever happens next: a call that ends early drops what still comes.
    callStream.on('data', onData);
    callStream.on('end', onEnd);
    const timeout = headers['grpc-timeout'];
    if (timeout !== undefined && !this.#startDeadline(timeout)) return;
    if (method.streaming) {
      callStream.on('drain', onDrain);
      method.handle(this);
    }
  }

  /** The call's custom metadata as grpc-js's Metadata (`-bin` values decoded), built on first use. */
  get metadata(): Metadata {
    if (this.#metadata === undefined) {
      const metadata = Metadata.fromHttp2Headers(this.headers);
      for (const key of TRANSPORT_HEADERS) metadata.remove(key);
      this.#metadata = metadata;
    }
    return this.#metadata;
  }

  /** One metadata value as sent (a text key's, read from the headers: no Metadata is built). */
  metadataValue(key: string): string | undefined {
    const value = this.headers[key];
    return typeof value === 'string' ? value : undefined;
  }

  /**
   * Aborted when the call is cancelled: by its client, its deadline, or a transport failure. Taken
   * from a pool on first use, and given back when the call ends uncancelled (signal-pool.ts): hold it
   * no longer than the call.
   */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = takeAbortController();
      if (this.#cancelled) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  get cancelled(): boolean {
    return this.#cancelled;
  }

  /** Whether the call's status has been sent (or it was cancelled): what is sent from now on is dropped. */
  get ended(): boolean {
    return this.#ended;
  }

  /**
   * Answers a unary call at once: response headers (plus `metadata`, custom initial metadata), the
   * message (framed, prefix included) and status OK, written together.
   */
  sendUnary(framed: Buffer, metadata?: OutgoingHttpHeaders): void {
    if (this.#ended) return;
    if (framed.length - PREFIX_BYTES > this.#limits.maxSendBytes) return this.#tooLargeToSend(framed);
    const stream = this.#stream;
    if (stream.destroyed) return this.#cancel();
    this.#ended = true;
    this.#clearDeadline();
    stream.on('wantTrailers', onWantTrailers);
    stream.respond(metadata === undefined ? RESPONSE_HEADERS : { ...metadata, ...RESPONSE_HEADERS }, WAIT_FOR_TRAILERS);
    this.#headersSent = true;
    stream.end(framed);
    this.#release();
  }

  /** Sends the response headers now, with custom initial metadata (they go with the first message otherwise). */
  sendMetadata(metadata: OutgoingHttpHeaders): void {
    if (this.#ended || this.#headersSent || this.#stream.destroyed) return;
    this.#respond({ ...metadata, ...RESPONSE_HEADERS });
  }

  /**
   * A streaming call's next message (framed, prefix included). Returns false when the stream's
   * buffer is full: wait for `onDrain`. A message over the send limit fails the call.
   */
  write(framed: Buffer): boolean {
    if (this.#ended) return true;
    if (framed.length - PREFIX_BYTES > this.#limits.maxSendBytes) {
      this.#tooLargeToSend(framed);
      return true;
    }
    if (this.#stream.destroyed) {
      this.#cancel();
      return true;
    }
    if (!this.#headersSent) this.#respond(RESPONSE_HEADERS);
    return this.#stream.write(framed);
  }

  /** Ends the call with a status (OK by default): in trailers, or trailers-only when nothing was sent. */
  end(end: CallStatus = OK): void {
    if (this.#ended) return;
    this.#sendStatus(end);
    this.#release();
  }

  /** Stops reading request messages (HTTP/2 flow control then holds the client back). */
  pause(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.#stream.pause();
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#flushInbox();
    if (!this.#paused) this.#stream.resume();
  }

  // What the stream's listeners and the reader call (the transport's own; handlers never do). --------

  /** MessageSink: a whole message from the reader. */
  framedMessage(message: Buffer, compressed: boolean): void {
    if (!compressed && this.#inbox === undefined && !this.#paused) return this.#deliver(message);
    const entry: InboxEntry = { message: compressed ? undefined : message, halfClose: false };
    (this.#inbox ??= []).push(entry);
    if (compressed) {
      const encoding = this.headers['grpc-encoding'];
      decompress(message, typeof encoding === 'string' ? encoding : undefined, this.#limits.maxReceiveBytes, (error, inflated) => {
        if (error) return this.#fail(error);
        entry.message = inflated;
        this.#flushInbox();
      });
    }
  }

  /** A DATA chunk. */
  data(chunk: Buffer): void {
    if (this.#ended) return;
    const reader = (this.#reader ??= new MessageReader(this.#limits.maxReceiveBytes, this));
    const tooLarge = reader.push(chunk);
    if (tooLarge !== undefined) this.#fail({ code: status.RESOURCE_EXHAUSTED, details: tooLarge });
  }

  /** The client's END_STREAM, once every chunk before it was read. */
  halfClose(): void {
    if (this.#ended) return;
    if (this.#reader?.midMessage) {
      return this.#fail({ code: status.INTERNAL, details: 'The request stream ended inside a message' });
    }
    if (this.#inbox === undefined && !this.#paused) return this.#deliverHalfClose();
    (this.#inbox ??= []).push({ message: undefined, halfClose: true });
    this.#flushInbox();
  }

  /** The stream closed before the call's status was sent: the client cancelled it, or its connection is gone. */
  aborted(): void {
    if (!this.#ended) this.#cancel();
  }

  wantTrailers(): void {
    this.#stream.sendTrailers(this.#trailers);
  }

  drained(): void {
    if (!this.#ended) this.onDrain?.();
  }

  #deliver(message: Buffer): void {
    const method = this.#method;
    if (method.streaming) {
      this.onMessage?.(message);
    } else if (this.#message !== undefined) {
      this.#fail({ code: status.UNIMPLEMENTED, details: `Received a second request message for unary method ${this.path}` });
    } else {
      this.#message = message;
    }
  }

  #deliverHalfClose(): void {
    const method = this.#method;
    if (method.streaming) {
      this.onHalfClose?.();
    } else if (this.#message === undefined) {
      this.#fail({ code: status.UNIMPLEMENTED, details: `Received no request message for unary method ${this.path}` });
    } else {
      method.handle(this, this.#message);
    }
  }

  #flushInbox(): void {
    const inbox = this.#inbox;
    if (inbox === undefined) return;
    while (inbox.length > 0 && !this.#paused && !this.#ended) {
      const entry = inbox[0]!;
      if (entry.halfClose) {
        inbox.shift();
        this.#inbox = undefined;
        return this.#deliverHalfClose();
      }
      if (entry.message === undefined) return;
      inbox.shift();
      this.#deliver(entry.message);
    }
    if (inbox.length === 0 && this.#inbox === inbox) this.#inbox = undefined;
  }

  #respond(headers: OutgoingHttpHeaders): void {
    this.#stream.on('wantTrailers', onWantTrailers);
    this.#stream.respond(headers, WAIT_FOR_TRAILERS);
    this.#headersSent = true;
  }

  /** Arms the call's deadline; false when the header is malformed (the call is then failed). */
  #startDeadline(header: string | string[]): boolean {
    const timeoutMs = typeof header === 'string' ? parseGrpcTimeout(header) : undefined;
    if (timeoutMs === undefined) {
      this.#fail({ code: status.INTERNAL, details: `Invalid grpc-timeout value "${String(header)}"` });
      return false;
    }
    if (timeoutMs <= MAX_TIMER_MS) {
      this.#deadline = setTimeout(() => this.#fail({ code: status.DEADLINE_EXCEEDED, details: 'Deadline exceeded' }), timeoutMs);
    }
    return true;
  }

  #clearDeadline(): void {
    if (this.#deadline !== undefined) {
      clearTimeout(this.#deadline);
      this.#deadline = undefined;
    }
  }

  #tooLargeToSend(framed: Buffer): void {
    this.#fail({
      code: status.RESOURCE_EXHAUSTED,
      details: `Sent message larger than max (${framed.length} vs. ${this.#limits.maxSendBytes})`,
    });
  }

  #sendStatus(end: CallStatus): void {
    this.#ended = true;
    this.#clearDeadline();
    const stream = this.#stream;
    if (stream.destroyed) return;
    if (this.#headersSent) {
      this.#trailers = trailersOf(end);
      stream.end();
    } else {
      stream.respond(trailersOnlyOf(end), END_STREAM);
      this.#headersSent = true;
    }
    // What the client still sends is read and dropped.
    if (this.#paused) {
      this.#paused = false;
      stream.resume();
    }
  }

  /** The transport ends the call with a status of its own, then cancels what its handler still does. */
  #fail(end: CallStatus): void {
    if (this.#ended) return;
    this.#sendStatus(end);
    this.#cancel();
  }

  #cancel(): void {
    if (this.#cancelled) return;
    this.#ended = true;
    this.#cancelled = true;
    this.#clearDeadline();
    this.#inbox = undefined;
    this.#controller?.abort();
    this.onCancel?.();
  }

  /** The call ended uncancelled: its signal serves another call. */
  #release(): void {
    const controller = this.#controller;
    if (controller !== undefined) {
      this.#controller = undefined;
      giveBackAbortController(controller);
    }
  }
}

const OK: CallStatus = { code: status.OK, details: 'OK' };

function onData(this: CallStream, chunk: Buffer): void {
  this[CALL].data(chunk);
}
function onEnd(this: CallStream): void {
  this[CALL].halfClose();
}
function onAborted(this: CallStream): void {
  this[CALL].aborted();
}
function onWantTrailers(this: CallStream): void {
  this[CALL].wantTrailers();
}
function onDrain(this: CallStream): void {
  this[CALL].drained();
}

/** A rejected stream's answer: an HTTP status alone (415 for a content type that is not gRPC's, as grpc-js answers). */
export function refuseStream(stream: ServerHttp2Stream, httpStatus: number): void {
  stream.respond({ [constants.HTTP2_HEADER_STATUS]: httpStatus }, END_STREAM);
}

/** A stream for no method the server has: trailers-only UNIMPLEMENTED, in grpc-js's words. */
export function unimplemented(stream: ServerHttp2Stream, path: string): void {
  stream.respond(trailersOnlyOf({ code: status.UNIMPLEMENTED, details: `The server does not implement the method ${path}` }), END_STREAM);
}
