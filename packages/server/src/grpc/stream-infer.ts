import type { Logger } from 'pino';
import { Errors, toInferenceServerError, type InferenceService, type StreamEvent } from '../core/index.ts';
import { streamInferMessage, wantsEmptyFinalResponse } from './infer-call.ts';
import { decodeInferMessage } from './infer-message.ts';
import { frameStreamInferResponse, type ResponseFields } from './infer-response-writer.ts';
import { callStatusOf } from './status.ts';
import { callContextOf } from './trace-metadata.ts';
import type { ServerCall, StreamingMethod } from './transport/server-call.ts';

/** What an error response of a stream repeats of its request. */
interface RequestIdentity {
  readonly model_name: string;
  readonly model_version: string;
  readonly id: string;
}

const UNREADABLE: RequestIdentity = { model_name: '', model_version: '', id: '' };

/** An open ModelStreamInfer call, as the frontend's shutdown sees it. */
export interface DrainableStream {
  /** Stop admitting requests; end the stream once those in flight are answered. */
  drain(): void;
  /** End the stream now with the error's status, whatever is still in flight. */
  cancel(error: unknown): void;
}

/**
 * Requests of one stream admitted and not yet answered, at most. Enough for a client to keep
 * several full batches queued; beyond it the stream stops reading until answers go out.
 */
export const MAX_IN_FLIGHT_PER_STREAM = 256;

/**
 * ModelStreamInfer: every request is run as it arrives (so requests of one stream batch
 * together), and each response is written as it comes, carrying the request's id and Triton's
 * `triton_final_response` parameter: a decoupled model's responses as it sends them (its flag-only
 * final response only for a request that set `triton_enable_empty_final_response`), any other
 * model's one response, final. A failed request is answered with `error_message` (final) and the
 * stream goes on. A cancelled stream cancels its requests in flight.
 *
 * Backpressure: the stream stops reading requests (so HTTP/2 flow control holds the client
 * back) while its answers are not being read (call.write returned false, until 'drain') or
 * MAX_IN_FLIGHT_PER_STREAM requests are in flight, and no request's next response is taken
 * until the client reads again (so a decoupled model's sender waits); a client that never reads
 * makes the server hold a bounded number of answers, not every answer it would have produced.
 */
export function streamInferHandler(service: InferenceService, streams: Set<DrainableStream>, logger: Logger): StreamingMethod {
  return { streaming: true, handle: (call) => serveStream(call, service, streams, logger) };
}

function serveStream(call: ServerCall, service: InferenceService, streams: Set<DrainableStream>, logger: Logger): void {
  let pending = 0;
  let inputEnded = false;
  let draining = false;
  let finished = false;
  let writeBlocked = false;
  let paused = false;
  /** Resolved at 'drain': what a request's next response waits for while the client does not read. */
  let drained: Promise<void> | undefined;
  let onDrained: (() => void) | undefined;
  // The stream's cancellation (or its end with an error) cancels its requests in flight.
  const cancel = new AbortController();

  const updateFlow = () => {
    const shouldPause = writeBlocked || pending >= MAX_IN_FLIGHT_PER_STREAM;
    if (shouldPause === paused) return;
    paused = shouldPause;
    if (paused) call.pause();
    else call.resume();
  };

  const finish = () => {
    if (finished) return;
    finished = true;
    streams.delete(stream);
    call.end();
  };
  const maybeFinish = () => {
    if (pending === 0 && (inputEnded || draining)) finish();
  };
  const stream: DrainableStream = {
    drain() {
      draining = true;
      maybeFinish();
    },
    cancel(error) {
      if (finished) return;
      finished = true;
      streams.delete(stream);
      call.end(callStatusOf(error));
      cancel.abort();
      onDrained?.();
    },
  };
  streams.add(stream);

  const write = (message: Buffer) => {
    if (finished || call.ended) return;
    if (!call.write(message)) {
      writeBlocked = true;
      drained ??= new Promise((resolve) => (onDrained = resolve));
      updateFlow();
    }
  };
  call.onDrain = () => {
    writeBlocked = false;
    drained = undefined;
    onDrained?.();
    updateFlow();
  };
  const fail = (msg: RequestIdentity, error: unknown, final = true) => {
    const e = toInferenceServerError(error);
    logger.debug({ method: 'ModelStreamInfer', code: e.code, err: e.message }, 'stream request failed');
    write(frameStreamInferResponse(e.message, emptyResponse(msg), final));
  };
  /** Writes one request's responses as they come, each once the client reads again. */
  const relay = async (msg: RequestIdentity, events: AsyncIterable<StreamEvent>, emptyFinal: boolean) => {
    for await (const event of events) {
      if (finished || call.ended) return;
      if (drained) await drained;
      if (event.kind === 'response') write(frameStreamInferResponse('', event.response, event.final));
      else if (event.kind === 'error') fail(msg, event.error, event.final);
      else if (emptyFinal) write(frameStreamInferResponse('', emptyResponse(msg), true));
    }
  };

  // Every request of the stream continues the trace its metadata names; the responses carry
  // no traceparent (a stream's initial metadata is sent once, before any of them).
  const context = callContextOf(call, cancel.signal);
  call.onMessage = (message) => {
    if (finished) return;
    let decoded;
    try {
      decoded = decodeInferMessage(message);
    } catch (error) {
      // Unreadable: answered on the stream like any other failure, which goes on.
      return fail(UNREADABLE, error);
    }
    const msg = decoded.request;
    if (draining) return fail(msg, Errors.shuttingDown());
    let emptyFinal: boolean;
    try {
      emptyFinal = wantsEmptyFinalResponse(msg.parameters);
    } catch (error) {
      return fail(msg, error);
    }
    pending++;
    updateFlow();
    const events = streamInferMessage(service, message, decoded, context);
    relay(msg, events, emptyFinal)
      .catch((error: unknown) => fail(msg, error))
      .finally(() => {
        pending--;
        updateFlow();
        maybeFinish();
      });
  };
  call.onHalfClose = () => {
    inputEnded = true;
    maybeFinish();
  };
  // Cancelled by its client, its deadline, or the transport (a message over the limit): its requests are cancelled.
  call.onCancel = () => {
    finished = true;
    streams.delete(stream);
    cancel.abort();
    onDrained?.();
  };
}

/** A response that names its request and carries nothing else: an error's, or a decoupled model's empty final one. */
function emptyResponse(msg: RequestIdentity): ResponseFields {
  return { modelName: msg.model_name, modelVersion: msg.model_version, id: msg.id, outputs: [] };
}
