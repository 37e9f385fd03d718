/**
 * Every failure the client reports: the server's message plus the HTTP status or gRPC
 * code that carried it. Neither is set for errors found on the client side.
 */
export class BatchwiseClientError extends Error {
  override readonly name = 'BatchwiseClientError';
  /** HTTP status of the response, for the HTTP client. */
  readonly httpStatus?: number;
  /** gRPC status code (see `status` of @grpc/grpc-js), for the gRPC client. */
  readonly grpcCode?: number;

  constructor(message: string, origin: { httpStatus?: number; grpcCode?: number } = {}) {
    super(message);
    if (origin.httpStatus !== undefined) this.httpStatus = origin.httpStatus;
    if (origin.grpcCode !== undefined) this.grpcCode = origin.grpcCode;
  }
}
