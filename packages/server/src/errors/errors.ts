/**
 * The server's one error type. Codes follow Triton's TRITONSERVER_Error_Code; each
 * frontend owns exactly one table from code to its own status (http/status.ts,
 * grpc/status.ts).
 */
import type { ErrorCode } from '@batchwise/protocol';

export type { ErrorCode };

export class InferenceServerError extends Error {
  override readonly name = 'InferenceServerError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Triton's bound on a tensor's element count and byte size (C++ INT64_MAX). */
export const INT64_MAX = 2n ** 63n - 1n;

export function isInferenceServerError(e: unknown): e is InferenceServerError {
  return e instanceof InferenceServerError;
}

/** Message catalogue: each error the server raises in more than one place is declared once. */
export const Errors = {
  invalidArg: (message: string) => new InferenceServerError('INVALID_ARG', message),
  internal: (message: string) => new InferenceServerError('INTERNAL', message),
  unsupported: (message: string) => new InferenceServerError('UNSUPPORTED', message),
  unavailable: (message: string) => new InferenceServerError('UNAVAILABLE', message),
  /**
   * The memory budget cannot hold the request now (retry later): 503 over HTTP, RESOURCE_EXHAUSTED over gRPC. Triton has
   * no memory guard; gRPC's code for an exhausted resource says what happened, where UNAVAILABLE would say the server is down.
   */
  overMemoryBudget: (message: string) => new InferenceServerError('RESOURCE_EXHAUSTED', message),
  // Triton answers an unknown model with 400 over HTTP (reference/README.md).
  unknownModel: (model: string) => new InferenceServerError('INVALID_ARG', `Request for unknown model: '${model}' is not found`),
  unknownVersion: (model: string, version: string) =>
    new InferenceServerError('NOT_FOUND', `Request for unknown model: '${model}' version ${version} is not found`),
  // Known model without a ready version: 404 over HTTP, as in Triton.
  modelNotReady: (model: string, reason?: string) =>
    new InferenceServerError(
      'NOT_FOUND',
      `Request for unknown model: '${model}' has no available versions` + (reason ? ` (${reason})` : ''),
    ),
  /** Triton's words (its tests and clients match on them); `detail` says more. */
  inputByteSizeMismatch: (input: string, model: string, expected: number, got: number, detail: string) =>
    new InferenceServerError(
      'INVALID_ARG',
      `input byte size mismatch for input '${input}' for model '${model}'. Expected ${expected}, got ${got}: ${detail}`,
    ),
  /** An HTTP body past --http-max-body-bytes (Triton's --http-max-input-size), in Triton's words (400). */
  requestBodyTooLarge: (declaredBytes: number | undefined, limitBytes: number) =>
    new InferenceServerError(
      'INVALID_ARG',
      `request JSON size of ${declaredBytes ?? `more than ${limitBytes}`} bytes exceeds the maximum allowed input size of ${limitBytes} bytes. ` +
        'Use --http-max-input-size to increase the limit.',
    ),
  /** A request whose length two headers give (Node's HTTP parser refuses it; Triton accepts it): see docs/triton-compatibility.md. */
  requestSmuggling: (parserReason: string) =>
    new InferenceServerError(
      'INVALID_ARG',
      `a request with both Transfer-Encoding and Content-Length is refused, as one a proxy may read otherwise (request smuggling): send only one of them (${parserReason})`,
    ),
  /** A request tensor whose element count passes INT64_MAX, in the words of Triton's HTTP frontend (its tests match on them). */
  elementCountOverflow: (input: string, shape: string) =>
    new InferenceServerError(
      'INVALID_ARG',
      `invalid shape for input '${input}': shape ${shape} causes total element count to exceed maximum size of ${INT64_MAX}`,
    ),
  /** A fixed-size request tensor whose element count fits INT64_MAX but whose byte size does not, in Triton's words. */
  byteSizeOverflow: (input: string, elementCount: bigint, elementByteSize: number) =>
    new InferenceServerError(
      'INVALID_ARG',
      `byte size overflow for input '${input}': element count (${elementCount}) * data type size (${elementByteSize}) exceeds maximum allowed size (${INT64_MAX})`,
    ),
  /**
   * A negative dimension in an HTTP JSON shape: Triton reads dimensions as JSON unsigned integers and answers this parse
   * error as INTERNAL (500), which its tests expect; `detail` names the input and the dimension.
   */
  shapeNotUnsigned: (detail: string) =>
    new InferenceServerError(
      'INTERNAL',
      `Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer: ${detail}`,
    ),
  /** A negative dimension in a gRPC shape (int64 on the wire), in core Triton's words (GetByteSize). */
  invalidDimension: (input: string, shape: string) =>
    new InferenceServerError('INVALID_ARG', `tensor '${input}' contains an invalid dimension ${shape}`),
  /** `ready` of a repository index request that is not a boolean, in Triton's words; `got` says what it was. */
  readyNotBoolean: (got: string) => new InferenceServerError('INVALID_ARG', `Invalid value for 'ready': expected a boolean, got ${got}`),
  queueFull: () => new InferenceServerError('UNAVAILABLE', 'Exceeds maximum queue size'),
  requestTimeout: () => new InferenceServerError('UNAVAILABLE', 'Request timeout expired'),
  /** Shed early (batchwise_latency_objective_ms): 503 over HTTP, UNAVAILABLE over gRPC, so a client retries elsewhere. */
  latencyObjectiveMiss: (model: string, objectiveMs: number) =>
    new InferenceServerError('UNAVAILABLE', `request would miss the latency objective of ${objectiveMs} ms for model '${model}'`),
  serverNotReady: () => new InferenceServerError('UNAVAILABLE', 'Server not ready'),
  cudaSharedMemoryUnsupported: () =>
    new InferenceServerError(
      'UNSUPPORTED',
      'CUDA shared memory is not supported by Batchwise; register system shared memory instead, or send tensors in the request',
    ),
  shuttingDown: () => new InferenceServerError('UNAVAILABLE', 'Server is shutting down; request not admitted'),
  /**
   * A load whose model cannot be read or written where it loads from (a file override the file system refuses, a
   * repository that cannot be listed): core Triton's words and code (INTERNAL, 500), then what happened, without server paths.
   */
  modelRepositoryPollFailed: (model: string, detail: string) =>
    new InferenceServerError('INTERNAL', `failed to load '${model}', failed to poll from model repository: ${detail}`),
  /** A load request that would bring code onto the server without the operator's opt-in (`flag`): 403 / PERMISSION_DENIED. */
  codeOverrideRefused: (model: string, what: string, flag: string) =>
    new InferenceServerError(
      'PERMISSION_DENIED',
      `failed to load '${model}': ${what}; code is accepted over the model-control API only by a server started with ${flag}`,
    ),
  /** A request its client cancelled (a closed connection or stream, a cancelled gRPC call): Triton's failure reason CANCELED. */
  cancelled: () => new InferenceServerError('CANCELLED', 'Request was cancelled: its client went away'),
  /** A decoupled model asked for one response (Triton's frontends: "HTTP end point" / "ModelInfer RPC"; docs/protocols.md). */
  decoupledRefused: (endpoint: string) =>
    new InferenceServerError('UNSUPPORTED', `${endpoint} doesn't support models with decoupled transaction policy`),
} as const;

/** Turns anything thrown into an InferenceServerError without losing its message. */
export function toInferenceServerError(e: unknown): InferenceServerError {
  if (isInferenceServerError(e)) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new InferenceServerError('INTERNAL', message, { cause: e });
}
