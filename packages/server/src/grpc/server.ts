import { pino, type Logger } from 'pino';
import type { RestrictionTable } from '../access/restricted-api.ts';
import { Errors, type InferenceService } from '../core/index.ts';
import { healthHandlers } from './health.ts';
import { inferenceServiceHandlers } from './inference-handlers.ts';
import { loadGrpcServiceRoot, serviceMethods, type MethodCodec } from './protos.ts';
import { restrictHandlers } from './restrictions.ts';
import type { DrainableStream } from './stream-infer.ts';
import { createGrpcServer } from './transport/grpc-server.ts';
import type { MethodHandler } from './transport/server-call.ts';

export interface GrpcFrontendOptions {
  /** Largest message received or sent, bytes (--grpc-max-message-bytes declares the server's default). */
  readonly maxMessageBytes: number;
  /** Interval of server keepalive pings, ms, idle connections included (--grpc-keepalive-time). */
  readonly keepaliveTimeMs: number;
  /** How long a ping may go unanswered before the connection is closed, ms (--grpc-keepalive-timeout). */
  readonly keepaliveTimeoutMs: number;
  /** Connections are sent GOAWAY at this age, so clients reconnect (and rebalance). @default unlimited */
  readonly maxConnectionAgeMs?: number;
  /** Time calls in flight get after GOAWAY at max age before the connection is closed. @default unlimited */
  readonly maxConnectionAgeGraceMs?: number;
  /**
   * --grpc-restricted-protocol: API groups whose RPCs need a metadata key and value.
   * grpc.health.v1 stays open (load balancers cannot send metadata). @default none
   */
  readonly restrictions?: RestrictionTable;
  /** @default a silent logger */
  readonly logger?: Logger;
  /**
   * Told as a ModelInfer call opens, before its request is read: the JavaScript backend wakes its parked workers
   * then (JsBackend.headsUp). @default ignored
   */
  readonly onInferCall?: () => void;
}

export interface GrpcFrontend {
  /** Binds and serves; resolves to the bound port (useful with port 0). */
  listen(host: string, port: number): Promise<number>;
  /**
   * Stops accepting calls and connections, lets in-flight calls finish and ends open
   * streams once their in-flight requests are answered; cancels what is left after graceMs.
   */
  close(graceMs: number): Promise<void>;
}

const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

export function createGrpcFrontend(service: InferenceService, options: GrpcFrontendOptions): GrpcFrontend {
  const logger = options.logger ?? pino({ level: 'silent' });
  const { onInferCall } = options;
  const streams = new Set<DrainableStream>();
  const root = loadGrpcServiceRoot();
  const routes = new Map<string, MethodHandler>();
  const serve = (name: string, handlers: (codecOf: (method: string) => MethodCodec) => Record<string, MethodHandler>) => {
    const methods = serviceMethods(root, name);
    const codecOf = (method: string) => methods.get(method)!.codec;
    for (const [method, handler] of Object.entries(handlers(codecOf))) routes.set(methods.get(method)!.path, handler);
  };
  serve('inference.GRPCInferenceService', (codecOf) =>
    restrictHandlers(inferenceServiceHandlers(service, streams, logger, codecOf), options.restrictions ?? new Map()),
  );
  serve('grpc.health.v1.Health', (codecOf) => healthHandlers(service, logger, codecOf));
  // Keepalive as grpc-js's server does it: pings idle connections too, and polices no client pings (no
  // ping strikes, no too_many_pings), so Triton's keepalive-permit / ping-strike flags have nothing to
  // set here: clients may keep alive without calls (grpc.keepalive_permit_without_calls).
  const server = createGrpcServer(routes, {
    maxReceiveBytes: options.maxMessageBytes,
    maxSendBytes: options.maxMessageBytes,
    keepaliveTimeMs: options.keepaliveTimeMs,
    keepaliveTimeoutMs: options.keepaliveTimeoutMs,
    ...(options.maxConnectionAgeMs !== undefined && { maxConnectionAgeMs: options.maxConnectionAgeMs }),
    ...(options.maxConnectionAgeGraceMs !== undefined && { maxConnectionAgeGraceMs: options.maxConnectionAgeGraceMs }),
    onSessionError: (error) => logger.debug({ err: error.message }, 'gRPC connection error'),
    ...(onInferCall && { onCall: (path) => path === MODEL_INFER_PATH && onInferCall() }),
  });

  return {
    listen: (host, port) => server.listen(host, port),
    close(graceMs) {
      for (const stream of [...streams]) stream.drain();
      return new Promise((resolve) => {
        const force = setTimeout(() => {
          logger.warn({ graceMs, streams: streams.size }, 'gRPC calls still open after the grace period: cancelling them');
          for (const stream of [...streams])
            stream.cancel(Errors.unavailable('Server is shutting down: the exit timeout ran out before this stream was answered'));
          server.destroy();
          resolve();
        }, graceMs);
        void server.shutdown().then(() => {
          clearTimeout(force);
          resolve();
        });
      });
    },
  };
}
