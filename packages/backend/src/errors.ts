/** Error codes as Triton's (TRITONSERVER_Error_Code); the server maps each to its HTTP and gRPC status. */
export type ErrorCode =
  | 'INVALID_ARG'
  | 'NOT_FOUND'
  | 'UNAVAILABLE'
  | 'RESOURCE_EXHAUSTED'
  | 'UNSUPPORTED'
  | 'INTERNAL'
  | 'ALREADY_EXISTS'
  | 'UNKNOWN'
  | 'CANCELLED';

export const ERROR_CODES: readonly ErrorCode[] = [
  'INVALID_ARG',
  'NOT_FOUND',
  'UNAVAILABLE',
  'RESOURCE_EXHAUSTED',
  'UNSUPPORTED',
  'INTERNAL',
  'ALREADY_EXISTS',
  'UNKNOWN',
  'CANCELLED',
];

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}

/**
 * An error for one request: returned (or thrown) by `execute`, the client gets its message with
 * the code's status (INVALID_ARG -> HTTP 400, INTERNAL -> 500...).
 */
export class ModelError extends Error {
  override name = 'ModelError';
  constructor(
    message: string,
    readonly code: ErrorCode = 'INTERNAL',
  ) {
    super(message);
  }
}

/** What `inferModel` throws: the called model's (or the server's) code and message. */
export class ModelCallError extends ModelError {
  override name = 'ModelCallError';
  constructor(
    message: string,
    code: ErrorCode,
    /** The model that was called. */
    readonly model: string,
  ) {
    super(message, code);
  }
}
