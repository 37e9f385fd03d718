import { createServer } from 'node:http';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { InferenceService } from '../core/index.ts';
import { Errors } from '../core/index.ts';
import type { RestrictionTable } from '../access/restricted-api.ts';
import { registerRestrictedApiHook } from './restricted-api-hook.ts';
import { answerClientError } from './client-error.ts';
import { registerContentEncoding } from './content-encoding.ts';
import { registerGenerateRoutes } from './routes/generate.ts';
import { registerHealthRoutes } from './routes/health.ts';
import { refuseBeforeRouting, registerInferRoutes } from './routes/infer.ts';
import { registerLoggingRoutes } from './routes/logging.ts';
import { registerModelRoutes } from './routes/models.ts';
import { registerRepositoryRoutes } from './routes/repository.ts';
import { registerSharedMemoryRoutes } from './routes/shared-memory.ts';
import { registerTraceRoutes } from './routes/trace.ts';
import { errorAnswer } from './error-answer.ts';
import type { DirectInferOptions } from './direct-infer.ts';

export interface HttpFrontendOptions {
  readonly logger: Logger;
  /** Largest request body accepted, bytes; larger ones are refused (400, Triton's words) before they are read whole. */
  readonly maxBodyBytes: number;
  /** Time allowed for a client to send a whole request, ms (slow clients get cut off). */
  readonly requestTimeoutMs: number;
  /**
   * How long an idle keep-alive connection stays open, ms. It must outlast the idle timeout of
   * any load balancer in front (the AWS ALB's is 60 s): a server that closes first races the
   * balancer reusing the connection, and the balancer answers 502.
   */
  readonly keepAliveTimeoutMs: number;
  /** API groups that need a header (--http-restricted-api); empty = all open. */
  readonly restrictions: RestrictionTable;
}

/** The KServe v2 REST protocol and its Triton extensions, on fastify. */
export function createHttpFrontend(service: InferenceService, options: HttpFrontendOptions): FastifyInstance {
  let closing = false;
  const direct: DirectInferOptions = { logger: options.logger, maxBodyBytes: options.maxBodyBytes, closing: () => closing };
  const app: FastifyInstance = Fastify({
    loggerInstance: options.logger.child({ frontend: 'http' }) as FastifyBaseLogger,
    // Per-request log lines would dominate the logs at thousands of requests per second.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.maxBodyBytes,
    // Node checks request timeouts every connectionsCheckingInterval (30 s by default):
    // checking every second makes a slow client's cut-off prompt. Headers get no longer than the
    // whole request. Idle keep-alive connections are not under either timeout (Node only times
    // requests in progress), so a long keep-alive does not weaken the slow-client cut-off.
    serverFactory: (handler) =>
      createServer(
        {
          requestTimeout: options.requestTimeoutMs,
          headersTimeout: Math.min(60_000, options.requestTimeoutMs),
          keepAliveTimeout: options.keepAliveTimeoutMs,
          connectionsCheckingInterval: Math.min(1000, options.requestTimeoutMs),
        },
        // A latency objective's refusals are answered before routing, unless the inference API needs a key (fastify checks it).
        options.restrictions.has('inference')
          ? handler
          : (request, response) => refuseBeforeRouting(service, request, response, direct) || handler(request, response),
      ),
    // Requests routed once close() has begun are refused by our own hook below, in the
    // protocol's error shape; fastify's would answer 503 with a body of its own.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // Requests Node's parser refuses (both Transfer-Encoding and Content-Length, malformed) or cuts off.
    clientErrorHandler: answerClientError(options.logger.child({ frontend: 'http' })),
  });
  // Every body is taken as raw bytes: infer bodies may carry binary tensors after the JSON.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: options.maxBodyBytes }, (_req, body, done) => done(null, body));

  app.setErrorHandler((error: FastifyError | Error, request, reply) => {
    if ('code' in error && error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      // Content-Length counts the encoded bytes; a compressed or chunked body passed the limit as it streamed.
      const declared = request.headers['content-encoding'] === undefined ? Number(request.headers['content-length']) : NaN;
      error = Errors.requestBodyTooLarge(Number.isSafeInteger(declared) ? declared : undefined, options.maxBodyBytes);
    }
    if ('code' in error && typeof error.code === 'string' && error.code.startsWith('Z_')) {
      void reply.code(400).send({ error: `request body could not be decompressed: ${error.message}` });
      return;
    }
    const { status, body } = errorAnswer(error, options.logger, request.method, request.url);
    void reply.code(status).send(body);
  });
  // A request that arrives on a connection still open after close() began (its headers were
  // still coming in, or it followed one in flight) is refused as Triton refuses a request while
  // the server stops: UNAVAILABLE, 503, {"error": ...}.
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', (_request, _reply, done) => done(closing ? Errors.shuttingDown() : undefined));
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({ error: `no route for ${request.method} ${request.url}` });
  });

  // While the server is not ready (shutting down), every response closes its connection, so
  // clients open new ones (refused once listeners close) instead of racing a closing socket.
  app.addHook('onSend', async (_request, reply) => {
    if (!service.isReady()) void reply.header('connection', 'close');
  });
  registerRestrictedApiHook(app, options.restrictions);
  registerContentEncoding(app);
  // Only inference replies are compressed, as Triton does (routes/infer.ts): Triton's asyncio
  // client advertises gzip through its HTTP library but decompresses only inference replies.
  void app.register(async (routes) => {
    registerHealthRoutes(routes, service);
    registerModelRoutes(routes, service);
    registerInferRoutes(routes, service);
    registerGenerateRoutes(routes, service);
    registerRepositoryRoutes(routes, service);
    registerSharedMemoryRoutes(routes, service);
    registerLoggingRoutes(routes, service);
    registerTraceRoutes(routes, service);
  });
  return app;
}
