/**
 * Error codes as Triton's (TRITONSERVER_Error_Code, plus RESOURCE_EXHAUSTED and PERMISSION_DENIED):
 * what the server's errors carry and JavaScript model code returns. The server maps each to its
 * HTTP and gRPC status.
 */
export const ERROR_CODES = [
  'INVALID_ARG',
  'NOT_FOUND',
  'UNAVAILABLE',
  'RESOURCE_EXHAUSTED',
  'UNSUPPORTED',
  'INTERNAL',
  'ALREADY_EXISTS',
  'UNKNOWN',
  'CANCELLED',
  /** A request the server's settings do not allow (code over the model-control API): HTTP 403, gRPC PERMISSION_DENIED. */
  'PERMISSION_DENIED',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}
