/**
 * Error codes as Triton's (TRITONSERVER_Error_Code, plus RESOURCE_EXHAUSTED): what the server's
 * errors carry and JavaScript model code returns. The server maps each to its HTTP and gRPC status.
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
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}
