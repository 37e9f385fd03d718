import { status } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { MethodCodec } from './protos.ts';
import { callStatusOf } from './status.ts';
import type { ServerCall, UnaryMethod } from './transport/server-call.ts';

/** Ends a call with the status of what its handler threw, logged (INTERNAL at error level, the rest at debug). */
export function failCall(call: ServerCall, method: string, logger: Logger, error: unknown): void {
  const end = callStatusOf(error);
  logger[end.code === status.INTERNAL ? 'error' : 'debug']({ method, code: end.code, err: end.details }, 'gRPC call failed');
  call.end(end);
}

/**
 * A unary RPC on the objects proto-loader would give and take: the request decoded, the handler's
 * response (or promise of one) encoded and sent; what it throws ends the call with its status.
 */
export function unary<Req, Res>(
  method: string,
  codec: MethodCodec,
  logger: Logger,
  fn: (request: Req, call: ServerCall) => Res | Promise<Res>,
): UnaryMethod {
  const run = async (call: ServerCall, request: Req) => {
    try {
      call.sendUnary(codec.encode(await fn(request, call)));
    } catch (error) {
      failCall(call, method, logger, error);
    }
  };
  return {
    streaming: false,
    handle(call, message) {
      let request: Req;
      try {
        request = codec.decode(message) as Req;
      } catch {
        // grpc-js's answer to a request it cannot decode.
        return call.end({ code: status.INTERNAL, details: 'Error deserializing request' });
      }
      void run(call, request);
    },
  };
}
