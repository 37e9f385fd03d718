import { CANARY_KEY_HEADER } from '../core/index.ts';
import type { TraceContext } from '../protocol/types.ts';
import type { CallContext } from './infer-call.ts';
import type { ServerCall } from './transport/server-call.ts';

/**
 * What an inference call's metadata says of its request, read straight from its headers (no
 * Metadata is built): the caller's W3C trace context (keys traceparent, tracestate) and its canary
 * stickiness key (`batchwise-canary-key`), with the call's cancellation.
 */
export function callContextOf(call: ServerCall, signal: AbortSignal): CallContext {
  const trace = traceContextOf(call);
  const canaryKey = call.metadataValue(CANARY_KEY_HEADER);
  return { signal, ...(trace !== undefined && { trace }), ...(canaryKey !== undefined && { canaryKey }) };
}

function traceContextOf(call: ServerCall): TraceContext | undefined {
  const traceparent = call.metadataValue('traceparent');
  if (traceparent === undefined) return undefined;
  const tracestate = call.metadataValue('tracestate');
  return { traceparent, ...(tracestate !== undefined && { tracestate }) };
}
