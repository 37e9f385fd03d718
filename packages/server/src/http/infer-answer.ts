import type { IncomingHttpHeaders } from 'node:http';
import type { InferenceService, InferOptions, MemoryReservation } from '../core/index.ts';
import { CANARY_KEY_HEADER } from '../core/index.ts';
import type { JsonArrayCounter } from '../tensor/json-census.ts';
import { sequenceCookie } from '../protocol/sequence-cookie.ts';
import { decodeHttpInferRequest, encodeHttpInferResponse, HEADER_LENGTH, outputsSentAsJson } from './infer-codec.ts';
import { admitJsonBody } from './json-admission.ts';
import { compressResponse, COMPRESSION_THRESHOLD_BYTES, negotiateResponseEncoding } from './response-compression.ts';

/** What answers an infer request needs of it, from fastify's request or from Node's (direct-infer.ts). */
export interface InferExchange {
  readonly body: Buffer;
  readonly headers: IncomingHttpHeaders;
  readonly model: string;
  readonly version: string | undefined;
  /** Its memory reservation (absent when the body was over the size limit). */
  readonly memory: MemoryReservation | undefined;
  /** Its JSON's values, counted as the body arrived. */
  readonly json: JsonArrayCounter | undefined;
  readonly arrivalNs: bigint | undefined;
  readonly signal: AbortSignal | undefined;
}

/** The 200 reply to an infer request: its headers besides Content-Type and Content-Length, and its bytes. */
export interface InferReply {
  readonly contentType: string;
  readonly headers: Record<string, string | number>;
  readonly payload: Buffer;
}

/** Decodes an infer request, runs it and encodes its reply; errors are thrown (InferenceServerError) for the frontend to answer. */
export async function answerInfer(service: InferenceService, exchange: InferExchange): Promise<InferReply> {
  const { body, headers, model, version, memory: held } = exchange;
  const headerLength = headers[HEADER_LENGTH];
  const target = { modelName: model, ...(version !== undefined && { modelVersion: version }) };
  const inferRequest = decodeHttpInferRequest(
    body,
    Array.isArray(headerLength) ? headerLength[0] : headerLength,
    model,
    version,
    held && ((json) => admitJsonBody(service, held, target, json, exchange.json)),
  );
  if (held) {
    // Inputs sent as JSON are decoded into arrays of their own, beside the body.
    let decodedBytes = 0;
    for (const input of inferRequest.inputs) if (input.data.buffer !== body.buffer) decodedBytes += input.data.byteLength;
    held.grow(decodedBytes);
  }
  const traceparent = headers.traceparent;
  const tracestate = headers.tracestate;
  const canaryKey = headers[CANARY_KEY_HEADER];
  const keyed = typeof canaryKey === 'string' ? { ...inferRequest, canaryKey } : inferRequest;
  const traced =
    typeof traceparent === 'string'
      ? { ...keyed, traceContext: { traceparent, ...(typeof tracestate === 'string' && { tracestate }) } }
      : keyed;
  // Optional fields only when present, without spread objects: this runs for every request.
  const options: { -readonly [K in keyof InferOptions]: InferOptions[K] } = { sentAsJson: outputsSentAsJson(inferRequest) };
  if (held) options.memory = held;
  if (exchange.arrivalNs !== undefined) options.arrivalNs = exchange.arrivalNs;
  if (exchange.signal) options.signal = exchange.signal;
  const response = await service.infer(traced, options);
  const encoded = encodeHttpInferResponse(response, inferRequest);
  const replyHeaders: Record<string, string | number> = {};
  // Mode opentelemetry: the request's own span, so that a client can find its trace.
  if (response.traceparent !== undefined) replyHeaders['traceparent'] = response.traceparent;
  // A sequence's requests must reach this task again: the load balancer's stickiness follows this cookie.
  const sequenceId = inferRequest.sequenceId ?? inferRequest.parameters['sequence_id'];
  if (sequenceId !== undefined && typeof sequenceId !== 'boolean' && sequenceId !== 0 && sequenceId !== '') {
    replyHeaders['set-cookie'] = sequenceCookie(sequenceId);
  }
  // Inference-Header-Content-Length counts the JSON before compression, as Triton's does.
  if (encoded.headerLength !== undefined) replyHeaders[HEADER_LENGTH] = encoded.headerLength;
  let payload = encoded.chunks.length === 1 ? encoded.chunks[0]! : Buffer.concat(encoded.chunks);
  const encoding = payload.length >= COMPRESSION_THRESHOLD_BYTES ? negotiateResponseEncoding(headers['accept-encoding']) : undefined;
  if (encoding !== undefined) {
    payload = await compressResponse(encoding, payload);
    replyHeaders['content-encoding'] = encoding;
  }
  return { contentType: encoded.contentType, headers: replyHeaders, payload };
}
