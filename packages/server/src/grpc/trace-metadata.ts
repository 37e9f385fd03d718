import { Metadata } from '@grpc/grpc-js';
import { CANARY_KEY_HEADER } from '../core/index.ts';
import type { TraceContext } from '../protocol/types.ts';

/** The caller's W3C trace context from the call's metadata (keys traceparent, tracestate), if it sent one. */
export function traceContextOf(metadata: Metadata): TraceContext | undefined {
  const [traceparent] = metadata.get('traceparent');
  if (typeof traceparent !== 'string') return undefined;
  const [tracestate] = metadata.get('tracestate');
  return { traceparent, ...(typeof tracestate === 'string' && { tracestate }) };
}

/** Initial metadata carrying the request span's traceparent back to the client. */
export function traceparentMetadata(traceparent: string): Metadata {
  const metadata = new Metadata();
  metadata.set('traceparent', traceparent);
  return metadata;
}

/** The caller's canary stickiness key (metadata `batchwise-canary-key`), if it sent one. */
export function canaryKeyOf(metadata: Metadata): string | undefined {
  const [key] = metadata.get(CANARY_KEY_HEADER);
  return typeof key === 'string' ? key : undefined;
}
