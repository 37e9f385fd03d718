/**
 * A wire payload that breaks the protocol's rules (a malformed BYTES layout). The package has no
 * error catalogue of its own: the server maps this to INVALID_ARG (tensor/bytes-codec.ts), the
 * client to a BatchwiseClientError.
 */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
}

export function isProtocolError(error: unknown): error is ProtocolError {
  return error instanceof ProtocolError;
}
