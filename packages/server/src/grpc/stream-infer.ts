import type { handleBidiStreamingCall } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { Errors, toInferenceServerError, type InferenceService } from '../core/index.ts';
import { runInferMessage } from './infer-call.ts';
import { canaryKeyOf, traceContextOf } from './trace-metadata.ts';
import { decodeInferMessage } from './infer-message.ts';
import { toServiceError } from './status.ts';
import type { ModelStreamInferResponseWire } from './wire-types.ts';

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
 * together), and each response is written when it completes, carrying the request's id.
 * A failed request is answered with `error_message` and the stream goes on.
 *
 * Backpressure: the stream stops reading requests (so HTTP/2 flow control holds the client
 * back) while its answers are not being read (call.write returned false, until 'drain') or
 * MAX_IN_FLIGHT_PER_STREAM requests are in flight; a client that never reads makes the server
 * hold a bounded number of answers, not every answer it would have produced.
 */
export function streamInferHandler(
  service: InferenceService,
  streams: Set<DrainableStream>,
  logger: Logger,
): handleBidiStreamingCall<Buffer, ModelStreamInferResponseWire> {
  return (call) => {
    let pending = 0;
    let inputEnded = false;
    let draining = false;
    let finished = false;
    let writeBlocked = false;
    let paused = false;

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
        // grpc-js ends a server stream with the status of an emitted error.
        call.emit('error', toServiceError(error));
      },
    };
    streams.add(stream);

    const write = (response: ModelStreamInferResponseWire) => {
      if (finished || call.cancelled) return;
      if (!call.write(response)) {
        writeBlocked = true;
        updateFlow();
      }
    };
    call.on('drain', () => {
      writeBlocked = false;
      updateFlow();
    });
    const fail = (msg: RequestIdentity, error: unknown) => {
      const e = toInferenceServerError(error);
      logger.debug({ method: 'ModelStreamInfer', code: e.code, err: e.message }, 'stream request failed');
      write({
        error_message: e.message,
        infer_response: {
          model_name: msg.model_name,
          model_version: msg.model_version,
          id: msg.id,
          parameters: {},
          outputs: [],
          raw_output_contents: [],
        },
      });
    };

    const streamTrace = traceContextOf(call.metadata);
    const streamCanaryKey = canaryKeyOf(call.metadata);
    call.on('data', (message: Buffer) => {
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
      pending++;
      updateFlow();
      // Every request of the stream continues the trace its metadata names; the responses carry
      // no traceparent (a stream's initial metadata is sent once, before any of them).
      runInferMessage(service, message, decoded, { context: streamTrace, sendTraceparent: () => undefined }, streamCanaryKey)
        .then(
          (response) => write({ error_message: '', infer_response: response }),
          (error: unknown) => fail(msg, error),
        )
        .finally(() => {
          pending--;
          updateFlow();
          maybeFinish();
        });
    });
    call.on('end', () => {
      inputEnded = true;
      maybeFinish();
    });
    call.on('cancelled', () => {
      finished = true;
      streams.delete(stream);
    });
    call.on('error', () => {
      finished = true;
      streams.delete(stream);
    });
  };
}
