import { Server, ServerCredentials } from '@grpc/grpc-js';
import { pino, type Logger } from 'pino';
import type { RestrictionTable } from '../access/restricted-api.ts';
import { Errors, type InferenceService } from '../core/index.ts';
import { healthHandlers } from './health.ts';
import { inferenceServiceHandlers } from './inference-handlers.ts';
import { loadServiceDefinitions, withRawInferRequests } from './protos.ts';
import { restrictHandlers } from './restrictions.ts';
import type { DrainableStream } from './stream-infer.ts';

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

export function createGrpcFrontend(service: InferenceService, options: GrpcFrontendOptions): GrpcFrontend {
  const logger = options.logger ?? pino({ level: 'silent' });
  // grpc-js servers ping idle connections too and do not police client pings (no ping
  // strikes, no too_many_pings), so Triton's keepalive-permit / ping-strike flags have nothing
  // to set here: clients may keep alive without calls (grpc.keepalive_permit_without_calls).
  const server = new Server({
    'grpc.max_receive_message_length': options.maxMessageBytes,
    'grpc.max_send_message_length': options.maxMessageBytes,
    'grpc.keepalive_time_ms': options.keepaliveTimeMs,
    'grpc.keepalive_timeout_ms': options.keepaliveTimeoutMs,
    ...(options.maxConnectionAgeMs !== undefined && { 'grpc.max_connection_age_ms': options.maxConnectionAgeMs }),
    ...(options.maxConnectionAgeGraceMs !== undefined && { 'grpc.max_connection_age_grace_ms': options.maxConnectionAgeGraceMs }),
    // Nothing serves channelz, so its per-call bookkeeping would be pure cost.
    'grpc.enable_channelz': 0,
  });
  const streams = new Set<DrainableStream>();
  const definitions = loadServiceDefinitions();
  server.addService(
    withRawInferRequests(definitions.inference),
    restrictHandlers(inferenceServiceHandlers(service, streams, logger), options.restrictions ?? new Map()),
  );
  server.addService(definitions.health, healthHandlers(service, logger));

  return {
    listen(host, port) {
      const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
      return new Promise((resolve, reject) => {
        server.bindAsync(address, ServerCredentials.createInsecure(), (error, bound) => {
          if (error) reject(error);
          else resolve(bound);
        });
      });
    },
    close(graceMs) {
      for (const stream of [...streams]) stream.drain();
      return new Promise((resolve) => {
        const force = setTimeout(() => {
          logger.warn({ graceMs, streams: streams.size }, 'gRPC calls still open after the grace period: cancelling them');
          // forceShutdown() destroys no connection while channelz is off (grpc-js 1.14 only
          // tracks sessions for channelz), so streams are ended here with a status of their own.
          for (const stream of [...streams])
            stream.cancel(Errors.unavailable('Server is shutting down: the exit timeout ran out before this stream was answered'));
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
    },
  };
}
