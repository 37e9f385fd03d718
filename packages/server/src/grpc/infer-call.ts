import { refusalDue, type InferenceService } from '../core/index.ts';
import type { TraceContext } from '../protocol/types.ts';
import { decodeInferRequest, encodeInferResponse } from './infer-codec.ts';
import { decodeInferMessage, type InferMessage } from './infer-message.ts';
import type { ModelInferResponseWire } from './wire-types.ts';

/**
 * One ModelInfer request, unary or in a stream: the message is charged as received, its typed
 * contents are admitted from their counts (element limits, what the model takes, their decoded
 * size in the budget) before they are decoded, and the reservation is held until the response.
 */
export async function runInferMessage(
  service: InferenceService,
  message: Uint8Array,
  decoded: InferMessage = decodeInferMessage(message),
  trace?: { readonly context: TraceContext | undefined; sendTraceparent(traceparent: string): void },
  /** The call's canary stickiness key (metadata `batchwise-canary-key`). */
  canaryKey?: string,
): Promise<ModelInferResponseWire> {
  const arrivalNs = process.hrtime.bigint();
  const { request, census } = decoded;
  // Its model's latency objective may refuse it from what the message names, before its tensors are decoded (issue 30).
  const refusal = service.shedOnArrival(
    { modelName: request.model_name, modelVersion: request.model_version, ...(canaryKey !== undefined && { canaryKey }) },
    arrivalNs,
  );
  if (refusal) {
    await refusalDue(refusal);
    throw refusal.error;
  }
  const memory = service.reserveRequestMemory(message.byteLength);
  try {
    if (census.elements > 0) {
      service.admitElements(memory, { modelName: request.model_name, modelVersion: request.model_version }, census);
    }
    const decodedRequest = decodeInferRequest(request);
    const inferRequest = canaryKey === undefined ? decodedRequest : { ...decodedRequest, canaryKey };
    const response = await service.infer(trace?.context ? { ...inferRequest, traceContext: trace.context } : inferRequest, {
      memory,
      arrivalNs,
    });
    if (response.traceparent !== undefined) trace?.sendTraceparent(response.traceparent);
    return encodeInferResponse(response);
  } finally {
    memory.release();
  }
}
