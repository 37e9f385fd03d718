import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { pino, type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { parseRestrictions } from './access/restricted-api.ts';
import { visibleGpuIds } from './backends/gpu-detect.ts';
import { createOnnxRuntimeBackend } from './backends/onnxruntime/onnxruntime-backend.ts';
import { CoreInferenceService } from './core/inference-service.ts';
import { SystemSharedMemory } from './shared-memory/system-shared-memory.ts';
import { parseCacheConfigFlags, ResponseCache } from './cache/response-cache.ts';
import { parseTraceConfigFlags } from './trace/trace-settings.ts';
import { Tracer } from './trace/tracer.ts';
import { ModelManager, type ModelControlMode } from './models/model-manager.ts';
import { modelSourceFor } from './repository/model-source.ts';
import type { InferenceService } from './core/types.ts';
import { createGrpcFrontend } from './grpc/server.ts';
import { createHttpFrontend } from './http/http-frontend.ts';
import { createMetricsEndpoint } from './metrics/metrics-endpoint.ts';
import { ServerMetrics } from './metrics/server-metrics.ts';
import { EmfWriter } from './metrics/emf-writer.ts';
import { startGpuMonitor } from './metrics/gpu-monitor.ts';
import { MemoryGuard } from './memory/memory-guard.ts';
import { withModelFootprints } from './memory/model-footprint.ts';
import { maxRequestElementsFor, resolveMemoryBudgetBytes, workerHeapLimitBytesFor } from './memory/memory-budget.ts';

export interface ServerOptions {
  readonly modelRepositories: readonly string[];
  /** Address every frontend binds; default 0.0.0.0. */
  readonly host?: string;
  /** 0 picks a free port. */
  readonly httpPort?: number;
  readonly grpcPort?: number;
  readonly metricsPort?: number;
  readonly allowHttp?: boolean;
  readonly allowGrpc?: boolean;
  readonly allowMetrics?: boolean;
  readonly strictModelConfig?: boolean;
  /** @default 'none' */
  readonly modelControlMode?: ModelControlMode;
  /** poll mode: seconds between repository polls. @default 15 */
  readonly repositoryPollSecs?: number;
  /** explicit mode: models to load at start-up ('*' = all). */
  readonly loadModels?: readonly string[];
  /** Largest total size of the `file:` overrides of one repository load request, bytes. @default 128 MiB */
  readonly modelLoadFilesMaxBytes?: number;
  readonly allowCpuFallback?: boolean;
  readonly maxBodyBytes?: number;
  readonly requestTimeoutMs?: number;
  /** Idle HTTP keep-alive connections are closed after this long, ms; above the AWS ALB's 60 s idle timeout. @default 65000 */
  readonly httpKeepAliveTimeoutMs?: number;
  readonly grpcMaxMessageBytes?: number;
  /** Triton syntax `<api>[,<api>...]:<key>=<value>`, one entry per flag. */
  readonly httpRestrictedApi?: readonly string[];
  readonly grpcRestrictedProtocol?: readonly string[];
  /** Triton's --strict-readiness: ready only while every model is ready. @default true */
  readonly strictReadiness?: boolean;
  /** Triton's --exit-on-error: a model that fails to load at start-up stops the server. @default false (Triton: true) */
  readonly exitOnError?: boolean;
  /** Bind addresses of the gRPC and metrics endpoints. @default host */
  readonly grpcHost?: string;
  readonly metricsHost?: string;
  /** gRPC keepalive ping interval and timeout, ms. @default 30000, 20000 */
  readonly grpcKeepaliveTimeMs?: number;
  readonly grpcKeepaliveTimeoutMs?: number;
  /** Triton's --grpc-max-connection-age(-grace), ms: connections are closed (GOAWAY) at this age. @default unlimited */
  readonly grpcMaxConnectionAgeMs?: number;
  readonly grpcMaxConnectionAgeGraceMs?: number;
  /** Triton's --allow-gpu-metrics: poll nvidia-smi for nv_gpu_* when a GPU is visible. @default true */
  readonly gpuMetrics?: boolean;
  /** Triton's --metrics-interval-ms: how often GPU metrics are polled. @default 5000 */
  readonly metricsIntervalMs?: number;
  /** Triton's `--cache-config` values: `local,size=<bytes>` turns the response cache on. */
  readonly cacheConfig?: readonly string[];
  /** Triton's `--trace-config` values, e.g. `triton,file=/tmp/trace.json`, `rate=100`, `level=TIMESTAMPS`. */
  readonly traceConfig?: readonly string[];
  /** Bytes ("12G"), a fraction of the container limit ("0.8"), or absent: 80% of the container (or machine) memory. */
  readonly memoryLimit?: string;
  /** Tensor elements one request may carry; more are refused with 400 / INVALID_ARGUMENT. @default one per 16 bytes of the memory budget */
  readonly maxRequestElements?: number;
  /** JavaScript heap limit of each model instance's worker thread, bytes. @default a quarter of the memory budget (64 MiB to 4 GiB) */
  readonly workerHeapLimitBytes?: number;
  /** Write CloudWatch embedded-metric-format lines to stdout every 10 s. */
  readonly cloudwatchMetrics?: boolean;
  /** The ServiceName dimension of those metrics. @default 'batchwise' */
  readonly cloudwatchServiceName?: string;
  readonly logger?: Logger;
  readonly logLevel?: string;
}

export interface RunningServer {
  readonly httpPort: number;
  readonly grpcPort: number;
  readonly metricsPort: number;
  readonly service: InferenceService;
  readonly metrics: ServerMetrics;
  readonly logger: Logger;
  /**
   * Graceful stop: readiness goes false at once (load balancers stop sending), requests are
   * still admitted for `graceMs` while they notice, then listeners close, every admitted
   * request completes, streams end, and models unload. `exitTimeoutMs` (Triton's
   * --exit-timeout-secs, counted from the call, grace included) bounds the wait for gRPC calls:
   * those still open when it runs out are cancelled. @default graceMs 0, exitTimeoutMs 30000
   */
  close(options?: { graceMs?: number; exitTimeoutMs?: number }): Promise<void>;
}

export const DEFAULT_MAX_BODY_BYTES = 256 * 1024 * 1024;
/** Triton's --exit-timeout-secs default. */
export const DEFAULT_EXIT_TIMEOUT_MS = 30_000;
/** Longer than the AWS ALB's default 60 s idle timeout, so the balancer always closes first. */
export const DEFAULT_HTTP_KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** The server's JSON logger (pino) at a level. */
export function createServerLogger(level: string): Logger {
  // Synchronous writes: the server logs events, not requests, and a forced exit (second signal,
  // exit timeout) must not lose the lines that say why; async writes still queued were lost.
  return pino({ level, base: { service: 'batchwise' } }, pino.destination({ dest: 1, sync: true }));
}

/** Loads the repositories and starts the enabled frontends. Ports of 0 are resolved in the result. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const logger = options.logger ?? createServerLogger(options.logLevel ?? 'info');
  const host = options.host ?? '0.0.0.0';
  // Parsed before anything starts, so a bad flag stops the server instead of leaving an API open.
  const httpRestrictions = parseRestrictions(options.httpRestrictedApi ?? []);
  const grpcRestrictions = parseRestrictions(options.grpcRestrictedProtocol ?? [], 'triton-grpc-protocol-');
  const metrics = new ServerMetrics();
  const memoryBudgetBytes = resolveMemoryBudgetBytes(options.memoryLimit);
  const memory = new MemoryGuard(memoryBudgetBytes, metrics);
  const models = new ModelManager(options.modelRepositories.map((location) => modelSourceFor(location, { logger })), {
    controlMode: options.modelControlMode ?? 'none',
    startupModels: options.loadModels ?? [],
    ...(options.modelLoadFilesMaxBytes !== undefined && { maxLoadFileBytes: options.modelLoadFilesMaxBytes }),
    backend: withModelFootprints(
      createOnnxRuntimeBackend({ workerHeapLimitBytes: options.workerHeapLimitBytes ?? workerHeapLimitBytesFor(memoryBudgetBytes) }),
      memory,
    ),
    metrics,
    logger,
    strictModelConfig: options.strictModelConfig ?? false,
    allowCpuFallback: options.allowCpuFallback ?? false,
    gpuIds: visibleGpuIds(),
    freeMemoryBytes: () => memory.freeBytes(),
  });
  const sharedMemory = new SystemSharedMemory();
  const tracer = new Tracer(parseTraceConfigFlags(options.traceConfig ?? []), logger);
  const cacheConfig = parseCacheConfigFlags(options.cacheConfig ?? []);
  if (cacheConfig && cacheConfig.sizeBytes > memoryBudgetBytes / 2) {
    throw new Error(`--cache-config local,size=${cacheConfig.sizeBytes} is more than half the memory budget (${memoryBudgetBytes} bytes)`);
  }
  const responseCache = cacheConfig && new ResponseCache(cacheConfig.sizeBytes);
  if (responseCache) metrics.observeResponseCache(responseCache);
  if (cacheConfig) memory.holdAtRest(cacheConfig.sizeBytes);
  const service = new CoreInferenceService(models.registry, models, memory, {
    sharedMemory,
    tracer,
    strictReadiness: options.strictReadiness ?? true,
    logger,
    ...(responseCache && { responseCache }),
    maxRequestElements: options.maxRequestElements ?? maxRequestElementsFor(memoryBudgetBytes),
  });
  const emf = options.cloudwatchMetrics
    ? new EmfWriter(metrics, { serviceName: options.cloudwatchServiceName ?? 'batchwise' })
    : undefined;
  emf?.start();
  const stopGpuMonitor =
    (options.gpuMetrics ?? true) && visibleGpuIds().length > 0 ? startGpuMonitor(metrics, logger, options.metricsIntervalMs) : undefined;

  let http: FastifyInstance | undefined;
  let grpc: ReturnType<typeof createGrpcFrontend> | undefined;
  let metricsServer: Server | undefined;
  let httpPort = 0;
  let grpcPort = 0;
  let metricsPort = 0;

  // Frontends listen before models load, so liveness is visible while loading (not ready yet).
  if (options.allowHttp ?? true) {
    http = createHttpFrontend(service, {
      logger,
      maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
      requestTimeoutMs: options.requestTimeoutMs ?? 60_000,
      keepAliveTimeoutMs: options.httpKeepAliveTimeoutMs ?? DEFAULT_HTTP_KEEP_ALIVE_TIMEOUT_MS,
      restrictions: httpRestrictions,
    });
    await http.listen({ host, port: options.httpPort ?? 8000 });
    httpPort = (http.server.address() as AddressInfo).port;
  }
  if (options.allowGrpc ?? true) {
    grpc = createGrpcFrontend(service, {
      logger,
      restrictions: grpcRestrictions,
      ...(options.grpcMaxMessageBytes !== undefined && { maxMessageBytes: options.grpcMaxMessageBytes }),
      ...(options.grpcKeepaliveTimeMs !== undefined && { keepaliveTimeMs: options.grpcKeepaliveTimeMs }),
      ...(options.grpcKeepaliveTimeoutMs !== undefined && { keepaliveTimeoutMs: options.grpcKeepaliveTimeoutMs }),
      ...(options.grpcMaxConnectionAgeMs !== undefined && { maxConnectionAgeMs: options.grpcMaxConnectionAgeMs }),
      ...(options.grpcMaxConnectionAgeGraceMs !== undefined && { maxConnectionAgeGraceMs: options.grpcMaxConnectionAgeGraceMs }),
    });
    grpcPort = await grpc.listen(options.grpcHost ?? host, options.grpcPort ?? 8001);
  }
  if (options.allowMetrics ?? true) {
    metricsServer = createMetricsEndpoint(metrics.registry);
    await new Promise<void>((resolve, reject) => {
      metricsServer!.once('error', reject).listen(options.metricsPort ?? 8002, options.metricsHost ?? host, () => resolve());
    });
    metricsPort = (metricsServer.address() as AddressInfo).port;
  }
  logger.info(
    { httpPort, grpcPort, metricsPort, repositories: options.modelRepositories, memoryBudgetBytes },
    'listening; loading models',
  );

  const running: RunningServer = {
    httpPort,
    grpcPort,
    metricsPort,
    service,
    metrics,
    logger,
    async close({ graceMs = 0, exitTimeoutMs = DEFAULT_EXIT_TIMEOUT_MS } = {}) {
      const exitDeadline = Date.now() + exitTimeoutMs;
      service.setReady(false);
      if (graceMs > 0) {
        logger.info({ graceMs }, 'not ready; still admitting requests while load balancers notice');
        await new Promise((resolve) => setTimeout(resolve, graceMs));
      }
      await Promise.all([
        http?.close(),
        grpc?.close(Math.max(0, exitDeadline - Date.now())),
        metricsServer && new Promise<void>((resolve) => metricsServer!.close(() => resolve())),
      ]);
      await models.close();
      memory.close();
      await sharedMemory.close();
      await tracer.close();
      await emf?.stop();
      stopGpuMonitor?.();
    },
  };

  await models.start();
  warnIfBudgetTooSmall(memory, memory.settle(), logger);
  const failed = service.repositoryIndex(false).filter((m) => m.state === 'UNAVAILABLE');
  if (options.exitOnError && failed.length > 0) {
    logger.error({ failed }, 'a model failed to load and --exit-on-error is set: stopping');
    await running.close();
    throw new Error(`--exit-on-error: ${failed.map((m) => `model '${m.name}' failed to load: ${m.reason}`).join('; ')}`);
  }
  if (options.modelControlMode === 'poll') models.startPolling((options.repositoryPollSecs ?? 15) * 1000);
  service.setReady(true);
  logger.info({ ready: service.isReady(), models: service.repositoryIndex(false) }, 'model repository loaded');
  return running;
}

/** A budget below what the process holds at rest refuses every request: say so at start. */
function warnIfBudgetTooSmall(memory: MemoryGuard, rssBytes: number, logger: Logger): void {
  if (memory.freeBytes() > 0 && rssBytes < memory.budgetBytes) return;
  logger.warn(
    { memoryBudgetBytes: memory.budgetBytes, baselineBytes: memory.baselineBytes, rssBytes },
    'the memory budget (--memory-limit) is below what the server holds at rest after loading its models: requests will be refused with 503; raise --memory-limit',
  );
}
