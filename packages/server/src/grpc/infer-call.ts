import {
  Errors,
  refusalDue,
  type InferenceService,
  type InferenceStream,
  type MemoryReservation,
  type StreamEvent,
} from '../core/index.ts';
import type { InferenceRequest, InferenceResponse, TraceContext } from '../protocol/types.ts';
import { decodeInferRequest } from './infer-codec.ts';
import { decodeInferMessage, type InferMessage } from './infer-message.ts';
import type { ParameterMapWire } from './wire-types.ts';

/** A call's context: its trace, its canary stickiness key (metadata `batchwise-canary-key`) and its cancellation. */
export interface CallContext {
  /** The caller's trace context (metadata `traceparent`, `tracestate`): the request's span continues it. */
  readonly trace?: TraceContext;
  readonly canaryKey?: string;
  /** Aborted when the call (or its stream) is cancelled. */
  readonly signal?: AbortSignal;
}

/**
 * One ModelInfer request, unary: refused for a decoupled model in Triton's words; otherwise run as
 * `admitted` describes, its reservation held until the response.
 */
export async function runInferMessage(
  service: InferenceService,
  message: Uint8Array,
  decoded: InferMessage = decodeInferMessage(message),
  call: CallContext = {},
): Promise<InferenceResponse> {
  const { request, memory, arrivalNs } = await admitted(service, message, decoded, call);
  try {
    if (service.isDecoupled(request.modelName, request.modelVersion)) throw Errors.decoupledRefused('ModelInfer RPC');
    return await service.infer(request, { memory, arrivalNs, ...(call.signal && { signal: call.signal }) });
  } finally {
    memory.release();
  }
}

/**
 * One request of a ModelStreamInfer stream: its responses as the model sends them (one for a model
 * that is not decoupled), the reservation held until the last. Iterating throws what refused it.
 */
export async function* streamInferMessage(
  service: InferenceService,
  message: Uint8Array,
  decoded: InferMessage,
  call: CallContext,
): AsyncGenerator<StreamEvent> {
  const { request, memory, arrivalNs } = await admitted(service, message, decoded, call);
  try {
    const stream: InferenceStream = service.inferStream(request, { memory, arrivalNs, ...(call.signal && { signal: call.signal }) });
    yield* stream;
  } finally {
    memory.release();
  }
}

/**
 * Before a request runs: its model's latency objective may refuse it from what the message names,
 * before its tensors are decoded (issue 30); the message is charged as received, its typed contents
 * are admitted from their counts (element limits, what the model takes, their decoded size in the
 * budget), and it is decoded. The caller releases the reservation.
 */
async function admitted(
  service: InferenceService,
  message: Uint8Array,
  decoded: InferMessage,
  call: CallContext,
): Promise<{ request: InferenceRequest; memory: MemoryReservation; arrivalNs: bigint }> {
  const arrivalNs = process.hrtime.bigint();
  const { request, census } = decoded;
  const { canaryKey } = call;
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
    const decodedRequest = decodeInferRequest({ ...request, parameters: withoutStreamParameters(request.parameters) });
    const keyed = canaryKey === undefined ? decodedRequest : { ...decodedRequest, canaryKey };
    const context = call.trace;
    return { request: context ? { ...keyed, traceContext: context } : keyed, memory, arrivalNs };
  } catch (error) {
    memory.release();
    throw error;
  }
}

/** Triton's request parameter asking a stream for decoupled models' empty final responses (a bool_param; not the model's). */
export const EMPTY_FINAL_RESPONSE_PARAMETER = 'triton_enable_empty_final_response';

/** Whether a stream request asked for empty final responses; another kind than bool_param is refused in Triton's words. */
export function wantsEmptyFinalResponse(parameters: ParameterMapWire | undefined): boolean {
  const p = parameters?.[EMPTY_FINAL_RESPONSE_PARAMETER];
  if (p === undefined) return false;
  if (p.parameter_choice !== 'bool_param') {
    throw Errors.invalidArg(`invalid value type for '${EMPTY_FINAL_RESPONSE_PARAMETER}' parameter, expected bool_param.`);
  }
  return p.bool_param === true;
}

/** The request's parameters without the ones Triton keeps for its frontend (`triton_`-prefixed ones). */
function withoutStreamParameters(parameters: ParameterMapWire | undefined): ParameterMapWire | undefined {
  if (!parameters || !(EMPTY_FINAL_RESPONSE_PARAMETER in parameters)) return parameters;
  const { [EMPTY_FINAL_RESPONSE_PARAMETER]: _, ...rest } = parameters;
  return rest;
}
