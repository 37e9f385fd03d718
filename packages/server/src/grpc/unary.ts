import { status, type handleUnaryCall, type ServerUnaryCall } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { toServiceError } from './status.ts';

/** Wraps a handler that returns (or throws) into grpc-js's callback style, logging failures. */
export function unary<Req, Res>(
  method: string,
  logger: Logger,
  fn: (request: Req, call: ServerUnaryCall<Req, Res>) => Res | Promise<Res>,
): handleUnaryCall<Req, Res> {
  return (call, callback) => {
    Promise.resolve()
      .then(() => fn(call.request, call))
      .then(
        (response) => callback(null, response),
        (error: unknown) => {
          const e = toServiceError(error);
          const level = e.code === status.INTERNAL ? 'error' : 'debug';
          logger[level]({ method, code: e.code, err: e.details }, 'gRPC call failed');
          callback(e);
        },
      );
  };
}
