import type { ErrorCode } from '@batchwise/protocol';

export { ERROR_CODES, isErrorCode, type ErrorCode } from '@batchwise/protocol';

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

/**
 * What a `ResponseSender`'s `send` rejects with: a response after the final one, or for a request
 * that was cancelled or ended without its final response (code CANCELLED when cancelled).
 */
export class ResponseSenderError extends ModelError {
  override name = 'ResponseSenderError';
}
