import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { pino, type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { describeEndpoint, isModelControlExposed, type ModelControlEndpoint } from './access/model-control-exposure.ts';
import { parseRestrictions } from './access/restricted-api.ts';
import { visibleGpuIds } from './backends/gpu-detect.ts';
import { createOnnxRuntimeBackend } from './backends/onnxruntime/onnxruntime-backend.ts';
import { createJsBackend } from './backends/js/js-backend.ts';
import { createPythonBackend } from './backends/python/python-backend.ts';
import { CustomMetrics } from './metrics/custom-metrics.ts';
import { backendByteSetting, parseBackendConfigFlags, unappliedBackendSettings } from './options/backend-config.ts';
import { CoreInferenceService } from './core/inference-service.ts';
import { SystemSharedMemory } from './shared-memory/system-shared-memory.ts';
import { parseCacheConfigFlags, ResponseCache } from './cache/response-cache.ts';
import { parseTraceConfigFlags } from './trace/trace-config-flags.ts';
import { Tracer } from './trace/tracer.ts';
import { ModelManager } from './models/model-manager.ts';
import { parseModelFilter } from './models/model-filter.ts';
import { RateLimiter } from './scheduler/rate-limiter.ts';
import { parseRateLimitResourceFlags } from './scheduler/rate-limit-flags.ts';
import { resolveServerOptions, type ServerOptions } from './options/index.ts';
import { MODEL_REPOSITORY_KEY_ENV } from './options/environment.ts';
import { createModelSource } from './repository/create-model-source.ts';
import type { InferenceService } from './core/types.ts';
import type { InferenceStream } from './core/response-stream.ts';
import type { InferenceResponse } from './protocol/types.ts';
import { createGrpcFrontend } from './grpc/server.ts';
import { createHttpFrontend } from './http/http-frontend.ts';
import { createMetricsEndpoint } from './metrics/metrics-endpoint.ts';
import { ServerMetrics } from './metrics/server-metrics.ts';
import { EmfWriter } from './metrics/emf-writer.ts';
import { startCpuMonitor } from './metrics/cpu-monitor.ts';
import { startGpuMonitor } from './metrics/gpu-monitor.ts';
import { MemoryGuard } from './memory/memory-guard.ts';
import { withModelFootprints } from './memory/model-footprint.ts';
import { byteCountFlag, maxRequestElementsFor, resolveMemoryBudgetBytes, workerHeapLimitBytesFor } from './memory/memory-budget.ts';
import { CacheSpace } from './repository/cache-space.ts';

export type { ServerOptions };

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
   * those still open when it runs out are cancelled. @default graceMs 0, exitTimeoutMs the server's resolved exitTimeoutMs (--exit-timeout-secs)
   */
  close(options?: { graceMs?: number; exitTimeoutMs?: number }): Promise<void>;
}

/** The server's JSON logger (pino) at a level. */
export function createServerLogger(level: string): Logger {
  // Synchronous writes: the server logs events, not requests, and a forced exit (second signal,
  // exit timeout) must not lose the lines that say why; async writes still queued were lost.
  return pino({ level, base: { service: 'batchwise' } }, pino.destination({ dest: 1, sync: true }));
}

/** Loads the repositories and starts the enabled frontends. Ports of 0 are resolved in the result. */
export async function startServer(given: ServerOptions): Promise<RunningServer> {
  const options = resolveServerOptions(given);
  const logger = options.logger ?? createServerLogger(options.logLevel ?? 'info');
  const host = options.host;
  // Parsed before anything starts, so a bad flag stops the server instead of leaving an API open.
  const httpRestrictions = parseRestrictions(options.httpRestrictedApi);
  const grpcRestrictions = parseRestrictions(options.grpcRestrictedProtocol, 'triton-grpc-protocol-');
  const metrics = new ServerMetrics();
  const memoryBudgetBytes = resolveMemoryBudgetBytes(options.memoryLimit);
  const memory = new MemoryGuard(memoryBudgetBytes, metrics);
  const workerHeapLimitBytes = options.workerHeapLimitBytes ?? workerHeapLimitBytesFor(memoryBudgetBytes);
  const rateLimitResources = parseRateLimitResourceFlags(options.rateLimitResources);
  const backendConfig = parseBackendConfigFlags(options.backendConfig);
  for (const setting of unappliedBackendSettings(backendConfig)) {
    logger.warn(
      { setting },
      `--backend-config ${setting} has no effect in Batchwise: the backends are built in; set their options per model in config.pbtxt`,
    );
  }
  // One for the whole server: every model's scheduler asks it before an instance executes.
  const rateLimiter = options.rateLimit === 'execution_count' ? new RateLimiter(rateLimitResources) : undefined;
  if (rateLimiter) logger.info({ resources: options.rateLimitResources }, 'rate limiter on (--rate-limit=execution_count)');
  // Many models per host (issue 27): parsed before anything loads, so a bad value stops the server.
  const modelMemoryLimitBytes = byteCountFlag('--model-memory-limit', options.modelMemoryLimit);
  const modelGpuMemoryLimitBytes = byteCountFlag('--model-gpu-memory-limit', options.modelGpuMemoryLimit);
  const cacheDiskLimitBytes = byteCountFlag('--model-cache-disk-limit', options.modelCacheDiskLimit);
  const modelFilter = parseModelFilter(options.modelFilter);
  if (modelFilter) logger.info({ modelFilter: modelFilter.description }, 'serving only the models of --model-filter');
  // Models loaded for requests come and go: the S3 cache keeps their versions until its disk limit needs room.
  const cacheSpace = options.loadOnDemand || cacheDiskLimitBytes !== undefined ? new CacheSpace(cacheDiskLimitBytes, logger) : undefined;
  if (modelMemoryLimitBytes !== undefined && modelMemoryLimitBytes > memoryBudgetBytes) {
    logger.warn(
      { modelMemoryLimitBytes, memoryBudgetBytes },
      '--model-memory-limit is larger than the memory budget (--memory-limit): loads fail on the budget before they evict to make room',
    );
  }
  const jsBackend = createJsBackend({ workerHeapLimitBytes, alone: () => memory.requestsInFlight <= 1 });
  const models = new ModelManager(
    options.modelRepositories.map((location) => createModelSource(location, { logger, ...(cacheSpace && { cacheSpace }) })),
    {
      controlMode: options.modelControlMode,
      startupModels: options.loadModels,
      maxLoadFileBytes: options.modelLoadFilesMaxBytes,
      allowCodeOverrides: options.allowCodeOverrides,
      backends: [
        withModelFootprints(createOnnxRuntimeBackend({ workerHeapLimitBytes }), memory, true),
        withModelFootprints(jsBackend, memory, false),
        withModelFootprints(
          createPythonBackend({
            logger,
            shmDefaultBytes: backendByteSetting(backendConfig, 'python', 'shm-default-byte-size'),
            shmGrowthBytes: backendByteSetting(backendConfig, 'python', 'shm-growth-byte-size'),
            metrics: new CustomMetrics(metrics.registry, (message) => logger.warn(message)),
          }),
          memory,
          false,
        ),
      ],
      metrics,
      logger,
      strictModelConfig: options.strictModelConfig,
      allowCpuFallback: options.allowCpuFallback,
      gpuIds: visibleGpuIds(),
      freeMemoryBytes: () => memory.freeBytes(),
      // Sequences' implicit states are held between requests: charged without a request's overhead.
      reserveMemory: (bytes) => memory.reserve(bytes, 0, 0),
      // Ensemble steps and in-server calls from JavaScript models go through the service built below.
      callModel: (request, call): Promise<InferenceResponse> => service.infer(request, call?.signal && { signal: call.signal }),
      streamModel: (request, call): InferenceStream => service.inferStream(request, call?.signal && { signal: call.signal }),
      ...(rateLimiter && { rateLimiter }),
      ...(options.loadOnDemand && { onDemand: { timeoutMs: options.loadOnDemandTimeoutMs, retryMs: options.loadOnDemandRetryMs } }),
      memoryLimits: { hostBytes: modelMemoryLimitBytes, gpuBytesPerDevice: modelGpuMemoryLimitBytes },
      ...(modelFilter && { modelFilter }),
    },
  );
  metrics.observeResidency(() => ({
    ...models.residencyFigures(),
    cacheBytes: cacheSpace?.bytes ?? 0,
    cacheLimitBytes: cacheSpace?.limitBytes,
    cacheDeletions: cacheSpace?.deletions ?? 0,
  }));
  const sharedMemory = new SystemSharedMemory();
  const traceConfig = parseTraceConfigFlags(options.traceConfig);
  // The OpenTelemetry SDK is loaded only in that mode: with tracing off or in mode triton nothing of it runs.
  const spans =
    traceConfig.settings.trace_mode === 'opentelemetry'
      ? new (await import('./trace/otlp-span-sink.ts')).OtlpSpanSink(traceConfig.opentelemetry, logger)
      : undefined;
  const tracer = new Tracer(traceConfig.settings, logger, spans);
  const cacheConfig = parseCacheConfigFlags(options.cacheConfig);
  if (cacheConfig && cacheConfig.sizeBytes > memoryBudgetBytes / 2) {
    throw new Error(`--cache-config local,size=${cacheConfig.sizeBytes} is more than half the memory budget (${memoryBudgetBytes} bytes)`);
  }
  const responseCache = cacheConfig && new ResponseCache(cacheConfig.sizeBytes);
  if (responseCache) metrics.observeResponseCache(responseCache);
  if (cacheConfig) memory.holdAtRest(cacheConfig.sizeBytes);
  const service = new CoreInferenceService(models.registry, models, memory, {
    sharedMemory,
    tracer,
    strictReadiness: options.strictReadiness,
    ...(options.serverId !== undefined && { serverName: options.serverId }),
    logger,
    ...(responseCache && { responseCache }),
    maxRequestElements: options.maxRequestElements ?? maxRequestElementsFor(memoryBudgetBytes),
  });
  const emf = options.cloudwatchMetrics ? new EmfWriter(metrics, { serviceName: options.cloudwatchServiceName }) : undefined;
  emf?.start();
  const stopGpuMonitor =
    options.gpuMetrics && visibleGpuIds().length > 0 ? startGpuMonitor(metrics, logger, options.metricsIntervalMs) : undefined;
  const stopCpuMonitor = options.cpuMetrics ? await startCpuMonitor(metrics, logger, options.metricsIntervalMs) : undefined;

  let http: FastifyInstance | undefined;
  let grpc: ReturnType<typeof createGrpcFrontend> | undefined;
  let metricsServer: Server | undefined;
  let httpPort = 0;
  let grpcPort = 0;
  let metricsPort = 0;

  // Frontends listen before models load, so liveness is visible while loading (not ready yet).
  if (options.allowHttp) {
    http = createHttpFrontend(service, {
      logger,
      maxBodyBytes: options.maxBodyBytes,
      requestTimeoutMs: options.requestTimeoutMs,
      keepAliveTimeoutMs: options.httpKeepAliveTimeoutMs,
      restrictions: httpRestrictions,
    });
    await http.listen({ host, port: options.httpPort });
    httpPort = (http.server.address() as AddressInfo).port;
  }
  if (options.allowGrpc) {
    grpc = createGrpcFrontend(service, {
      logger,
      restrictions: grpcRestrictions,
      maxMessageBytes: options.grpcMaxMessageBytes,
      keepaliveTimeMs: options.grpcKeepaliveTimeMs,
      keepaliveTimeoutMs: options.grpcKeepaliveTimeoutMs,
      // Only into an idle server: with requests in hand, the main thread needs the cores, and a worker busy with them is not parked.
      onInferCall: () => memory.requestsInFlight === 0 && jsBackend.headsUp(),
      ...(options.grpcMaxConnectionAgeMs !== undefined && { maxConnectionAgeMs: options.grpcMaxConnectionAgeMs }),
      ...(options.grpcMaxConnectionAgeGraceMs !== undefined && { maxConnectionAgeGraceMs: options.grpcMaxConnectionAgeGraceMs }),
    });
    grpcPort = await grpc.listen(options.grpcHost ?? host, options.grpcPort);
  }
  if (options.allowMetrics) {
    metricsServer = createMetricsEndpoint(metrics.registry);
    await new Promise<void>((resolve, reject) => {
      metricsServer!.once('error', reject).listen(options.metricsPort, options.metricsHost ?? host, () => resolve());
    });
    metricsPort = (metricsServer.address() as AddressInfo).port;
  }
  reportModelControlExposure(
    [
      ...(http ? [{ protocol: 'http' as const, host, port: httpPort, restrictions: httpRestrictions }] : []),
      ...(grpc ? [{ protocol: 'grpc' as const, host: options.grpcHost ?? host, port: grpcPort, restrictions: grpcRestrictions }] : []),
    ],
    options.modelControlMode === 'explicit',
    options.allowCodeOverrides,
    metrics,
    logger,
  );
  logger.info({ httpPort, grpcPort, metricsPort, repositories: options.modelRepositories, memoryBudgetBytes }, 'listening; loading models');

  const running: RunningServer = {
    httpPort,
    grpcPort,
    metricsPort,
    service,
    metrics,
    logger,
    async close({ graceMs = 0, exitTimeoutMs = options.exitTimeoutMs } = {}) {
      const exitDeadline = Date.now() + exitTimeoutMs;
      service.setReady(false);
      // Sequences in flight may finish within the grace period; new ones are refused in Triton's words.
      for (const version of models.registry.loadedVersions()) version.scheduler.stop?.();
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
      stopCpuMonitor?.();
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
  if (options.modelControlMode === 'poll') models.startPolling(options.repositoryPollSecs * 1000);
  service.setReady(true);
  logger.info({ ready: service.isReady(), models: service.repositoryIndex(false) }, 'model repository loaded');
  return running;
}

/**
 * A model-control API that answers without a key on an address others reach is a way in: say
 * at start what it exposes and how to close it, and publish it (batchwise_model_control_exposed)
 * for `batchwise doctor`. Only explicit mode loads and unloads over the API.
 */
function reportModelControlExposure(
  endpoints: readonly ModelControlEndpoint[],
  explicit: boolean,
  allowCodeOverrides: boolean,
  metrics: ServerMetrics,
  logger: Logger,
): void {
  const exposed = endpoints.filter((endpoint) => explicit && isModelControlExposed(endpoint));
  for (const endpoint of endpoints) {
    const address = describeEndpoint(endpoint).slice(endpoint.protocol.length + 1);
    metrics.modelControlExposed.labels({ protocol: endpoint.protocol, address }).set(exposed.includes(endpoint) ? 1 : 0);
  }
  if (exposed.length === 0) return;
  logger.warn(
    { endpoints: exposed.map(describeEndpoint), allowCodeOverrides },
    `the model-control API answers without a key on ${exposed.map(describeEndpoint).join(' and ')}: anyone who reaches it can ` +
      'unload every model and load others, with configs and ONNX files of their own that ONNX Runtime parses in this process' +
      (allowCodeOverrides ? ', and run code on this server (--allow-code-overrides is on)' : '') +
      `; give it a key (${MODEL_REPOSITORY_KEY_ENV}, or model-repository in --http-restricted-api and --grpc-restricted-protocol) ` +
      'or listen on 127.0.0.1 (--http-address, --grpc-address)',
  );
}

/** A budget below what the process holds at rest refuses every request: say so at start. */
function warnIfBudgetTooSmall(memory: MemoryGuard, rssBytes: number, logger: Logger): void {
  if (memory.freeBytes() > 0 && rssBytes < memory.budgetBytes) return;
  logger.warn(
    { memoryBudgetBytes: memory.budgetBytes, baselineBytes: memory.baselineBytes, rssBytes },
    'the memory budget (--memory-limit) is below what the server holds at rest after loading its models: requests will be refused with 503; raise --memory-limit',
  );
}
