import { Command, Option } from 'commander';
import { createServerLogger, DEFAULT_EXIT_TIMEOUT_MS, DEFAULT_HTTP_KEEP_ALIVE_TIMEOUT_MS, DEFAULT_MAX_BODY_BYTES, startServer } from '../server.ts';
import { DEFAULT_GRPC_MAX_MESSAGE_BYTES } from '../grpc/server.ts';
import { pinoLevelFor } from '../logging/log-settings.ts';
import { collect, parseBool, parsePort, parsePositiveInteger } from './flags.ts';
import { addFlagsWithoutEffect, flagsWithoutEffectGiven } from './triton-flags.ts';
import { forceExit } from './force-exit.ts';
import { DEFAULT_FILE_OVERRIDE_MAX_BYTES, FILE_OVERRIDE_LIMIT_FLAG } from '../models/load-parameters.ts';

interface ServeFlags {
  modelRepository: string[];
  httpPort: number;
  grpcPort: number;
  metricsPort: number;
  httpAddress: string;
  allowHttp: boolean;
  allowGrpc: boolean;
  allowMetrics: boolean;
  strictModelConfig: boolean;
  allowCpuFallback: boolean;
  logVerbose: number;
  logInfo: boolean;
  logWarning: boolean;
  logError: boolean;
  logFormat: string;
  grpcAddress?: string;
  metricsAddress?: string;
  grpcKeepaliveTime: number;
  grpcKeepaliveTimeout: number;
  grpcMaxConnectionAge?: number;
  grpcMaxConnectionAgeGrace?: number;
  grpcMaxMessageBytes: number;
  allowGpuMetrics: boolean;
  metricsIntervalMs?: number;
  strictReadiness: boolean;
  exitOnError: boolean;
  disableAutoCompleteConfig: boolean;
  modelControlMode: 'none' | 'poll' | 'explicit';
  repositoryPollSecs: number;
  loadModel?: string[];
  httpRestrictedApi?: string[];
  traceConfig?: string[];
  cacheConfig?: string[];
  responseCacheByteSize?: number;
  grpcRestrictedProtocol?: string[];
  httpMaxBodyBytes: number;
  httpMaxInputSize?: number;
  modelLoadFilesMaxBytes: number;
  httpKeepAliveTimeoutSecs: number;
  exitTimeoutSecs: number;
  shutdownGraceSecs: number;
  memoryLimit?: string;
  maxRequestElements?: number;
  cloudwatchMetrics: boolean;
  cloudwatchServiceName: string;
}

export function serveCommand(): Command {
  const command = new Command('serve')
    .description('Serve the models of one or more model repositories over HTTP, gRPC and metrics endpoints')
    .requiredOption('--model-repository <path>', 'model repository folder (Triton layout); repeat for several', collect)
    .option('--http-port <port>', 'port of the KServe v2 HTTP/REST endpoint', parsePort, 8000)
    .option('--grpc-port <port>', 'port of the KServe v2 / Triton gRPC endpoint', parsePort, 8001)
    .option('--metrics-port <port>', 'port of the Prometheus /metrics endpoint', parsePort, 8002)
    .option('--http-address <address>', 'address the HTTP endpoint binds to (and gRPC and metrics unless given their own)', '0.0.0.0')
    .option('--grpc-address <address>', 'address the gRPC endpoint binds to (default: --http-address)')
    .option('--metrics-address <address>', 'address the metrics endpoint binds to (default: --http-address)')
    .option('--grpc-keepalive-time <ms>', 'interval of gRPC keepalive pings; below the load balancer idle timeout', parsePositiveInteger, 30_000)
    .option('--grpc-keepalive-timeout <ms>', 'time a keepalive ping may go unanswered before the connection is closed', parsePositiveInteger, 20_000)
    .option('--grpc-max-connection-age <ms>', 'connections are sent GOAWAY at this age, so clients reconnect and spread over replicas (default: unlimited)', parsePositiveInteger)
    .option('--grpc-max-connection-age-grace <ms>', 'time calls in flight get after a max-age GOAWAY before the connection is closed (default: unlimited)', parsePositiveInteger)
    .option('--grpc-max-message-bytes <bytes>', 'largest gRPC message received or sent (Triton has no such flag and allows 2 GiB)', parsePositiveInteger, DEFAULT_GRPC_MAX_MESSAGE_BYTES)
    .option('--allow-http [bool]', 'serve HTTP/REST (Triton syntax: --allow-http=false disables)', parseBool, true)
    .option('--allow-grpc [bool]', 'serve gRPC', parseBool, true)
    .option('--allow-metrics [bool]', 'serve Prometheus metrics', parseBool, true)
    .option('--allow-gpu-metrics [bool]', 'export nv_gpu_* metrics (polled from nvidia-smi) when a GPU is visible', parseBool, true)
    .option('--metrics-interval-ms <ms>', 'how often GPU metrics are polled (default: 5000)', parsePositiveInteger)
    .option(
      '--strict-model-config [bool]',
      'require a complete config.pbtxt for every model; when false, missing parts are auto-completed from the ONNX model',
      parseBool,
      false,
    )
    .option(
      '--allow-cpu-fallback [bool]',
      'let a KIND_GPU model run on CPU when CUDA is unusable (logged as a warning and shown in its metadata); off by default, so such a model fails to load instead',
      parseBool,
      false,
    )
    .addOption(
      new Option('--model-control-mode <mode>', 'none: load everything at start-up; poll: also pick up changes every --repository-poll-secs; explicit: load and unload through the repository API')
        .choices(['none', 'poll', 'explicit'])
        .default('none'),
    )
    .option('--repository-poll-secs <secs>', 'poll mode: seconds between repository polls', parsePositiveInteger, 15)
    .option('--load-model <name>', "explicit mode: a model to load at start-up ('*' for all); repeat for several", collect)
    .option(
      '--http-restricted-api <spec>',
      'restrict API groups over HTTP: <api>[,<api>...]:<key>=<value> (groups: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging); repeat for several',
      collect,
    )
    .option(
      '--grpc-restricted-protocol <spec>',
      "the same for gRPC; clients send the header 'triton-grpc-protocol-<key>'",
      collect,
    )
    .option(
      '--cache-config <spec>',
      'response cache, as Triton: local,size=<bytes>; models opt in with response_cache { enable: true } in config.pbtxt',
      collect,
    )
    .option('--response-cache-byte-size <bytes>', "Triton's older form of --cache-config local,size=<bytes>", parsePositiveInteger)
    .option(
      '--trace-config <spec>',
      'request tracing, as Triton: [triton,]<key>=<value> with file=<path> (only here, never over the API), level=OFF|TIMESTAMPS, rate=<1 in N>, count=<n, -1 = no limit>, log-frequency=<traces per file, 0 = one file at shutdown>; repeat for several',
      collect,
    )
    .option('--log-verbose <level>', 'verbose logging level: 0 = info, 1 or more = debug', (v) => Number(v), 0)
    .option('--log-info [bool]', 'log info messages', parseBool, true)
    .option('--log-warning [bool]', 'log warnings', parseBool, true)
    .option('--log-error [bool]', 'log errors', parseBool, true)
    .addOption(new Option('--log-format <format>', "log format: Batchwise logs JSON lines ('default')").choices(['default']).default('default'))
    .option(
      '--strict-readiness [bool]',
      'ready only while every model is ready (false: ready once start-up loading is done, so one broken model does not take the task out of the load balancer)',
      parseBool,
      true,
    )
    .option(
      '--exit-on-error [bool]',
      "exit at start-up when a model fails to load (Triton's default is true; Batchwise's is false: the others serve and the failure is reported)",
      parseBool,
      false,
    )
    .option('--disable-auto-complete-config [bool]', 'the same as --strict-model-config=true', parseBool, false)
    .option('--http-max-body-bytes <bytes>', 'largest request body accepted over HTTP', parsePositiveInteger, DEFAULT_MAX_BODY_BYTES)
    .option('--http-max-input-size <bytes>', "Triton's name for --http-max-body-bytes (wins when both are given)", parsePositiveInteger)
    .option(
      '--max-request-elements <count>',
      'most tensor elements one request may carry over HTTP or gRPC, counted before they are decoded; more get 400 / INVALID_ARGUMENT. Default: one per 16 bytes of --memory-limit',
      parsePositiveInteger,
    )
    .option(
      FILE_OVERRIDE_LIMIT_FLAG + ' <bytes>',
      "largest total size of the file overrides ('file:<version>/<name>' parameters, decoded) of one repository load request",
      parsePositiveInteger,
      DEFAULT_FILE_OVERRIDE_MAX_BYTES,
    )
    .option(
      '--memory-limit <bytes|fraction>',
      'memory budget: bytes (12G, 512Mi, 12884901888) or a fraction of the container limit (0.8); requests that would exceed it get 503. Default: 0.8 of the cgroup limit, or of physical memory',
    )
    .option('--cloudwatch-metrics [bool]', 'write CloudWatch embedded-metric-format lines to stdout every 10 s (also BATCHWISE_CLOUDWATCH_METRICS=1)', parseBool, process.env['BATCHWISE_CLOUDWATCH_METRICS'] === '1')
    .option('--cloudwatch-service-name <name>', 'ServiceName dimension of the CloudWatch metrics', 'batchwise')
    .option(
      '--shutdown-grace-secs <secs>',
      'on SIGTERM: readiness goes false at once, requests are still admitted this long (so the load balancer can deregister), then draining starts',
      (v) => Number(v),
      5,
    )
    .option(
      '--http-keep-alive-timeout-secs <secs>',
      'idle HTTP keep-alive connections are closed after this long; keep it above the load balancer idle timeout (AWS ALB: 60 s)',
      parsePositiveInteger,
      DEFAULT_HTTP_KEEP_ALIVE_TIMEOUT_MS / 1000,
    )
    .option(
      '--exit-timeout-secs <secs>',
      'on SIGTERM, time allowed (grace included) for in-flight requests and gRPC streams before they are cancelled and the process exits',
      parsePositiveInteger,
      DEFAULT_EXIT_TIMEOUT_MS / 1000,
    );
  return addFlagsWithoutEffect(command).action(async (flags: ServeFlags) => {
    const logger = createServerLogger(
      pinoLevelFor({ log_verbose_level: flags.logVerbose, log_info: flags.logInfo, log_warning: flags.logWarning, log_error: flags.logError }),
    );
    for (const given of flagsWithoutEffectGiven(flags as unknown as Record<string, unknown>)) {
      logger.warn(given, `${given.flag} has no effect in Batchwise: ${given.reason}`);
    }
    const starting = startServer({
      logger,
      modelRepositories: flags.modelRepository,
      host: flags.httpAddress,
      ...(flags.grpcAddress !== undefined && { grpcHost: flags.grpcAddress }),
      ...(flags.metricsAddress !== undefined && { metricsHost: flags.metricsAddress }),
      grpcKeepaliveTimeMs: flags.grpcKeepaliveTime,
      grpcKeepaliveTimeoutMs: flags.grpcKeepaliveTimeout,
      ...(flags.grpcMaxConnectionAge !== undefined && { grpcMaxConnectionAgeMs: flags.grpcMaxConnectionAge }),
      ...(flags.grpcMaxConnectionAgeGrace !== undefined && { grpcMaxConnectionAgeGraceMs: flags.grpcMaxConnectionAgeGrace }),
      grpcMaxMessageBytes: flags.grpcMaxMessageBytes,
      httpKeepAliveTimeoutMs: flags.httpKeepAliveTimeoutSecs * 1000,
      gpuMetrics: flags.allowGpuMetrics,
      ...(flags.metricsIntervalMs !== undefined && { metricsIntervalMs: flags.metricsIntervalMs }),
      strictReadiness: flags.strictReadiness,
      exitOnError: flags.exitOnError,
      httpPort: flags.httpPort,
      grpcPort: flags.grpcPort,
      metricsPort: flags.metricsPort,
      allowHttp: flags.allowHttp,
      allowGrpc: flags.allowGrpc,
      allowMetrics: flags.allowMetrics,
      strictModelConfig: flags.strictModelConfig || flags.disableAutoCompleteConfig,
      modelControlMode: flags.modelControlMode,
      repositoryPollSecs: flags.repositoryPollSecs,
      loadModels: flags.loadModel ?? [],
      httpRestrictedApi: withKeyFromEnvironment(flags.httpRestrictedApi),
      grpcRestrictedProtocol: withKeyFromEnvironment(flags.grpcRestrictedProtocol),
      traceConfig: flags.traceConfig ?? [],
      cacheConfig: [
        ...(flags.cacheConfig ?? []),
        ...(flags.responseCacheByteSize !== undefined ? [`local,size=${flags.responseCacheByteSize}`] : []),
      ],
      allowCpuFallback: flags.allowCpuFallback,
      maxBodyBytes: flags.httpMaxInputSize ?? flags.httpMaxBodyBytes,
      modelLoadFilesMaxBytes: flags.modelLoadFilesMaxBytes,
      ...(flags.memoryLimit !== undefined && { memoryLimit: flags.memoryLimit }),
      ...(flags.maxRequestElements !== undefined && { maxRequestElements: flags.maxRequestElements }),
      cloudwatchMetrics: flags.cloudwatchMetrics,
      cloudwatchServiceName: flags.cloudwatchServiceName,
    });
    // Signals are handled from here on, not once start-up has finished: models serve as soon as
    // they load, while start-up may still be loading others, and a SIGTERM's default action
    // would drop what they hold.
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) {
        logger.warn({ signal }, 'second signal: exiting now');
        return forceExit(logger);
      }
      stopping = true;
      logger.info({ signal }, 'shutting down: not ready, draining in-flight requests');
      const force = setTimeout(() => {
        logger.error('exit timeout reached with requests still in flight: forcing exit');
        forceExit(logger);
      }, flags.exitTimeoutSecs * 1000);
      force.unref();
      void starting
        .then((server) => server.close({ graceMs: flags.shutdownGraceSecs * 1000, exitTimeoutMs: flags.exitTimeoutSecs * 1000 }))
        .then(
          () => {
            logger.info('drained; exiting');
            process.exit(0);
          },
          (error: Error) => {
            logger.error({ err: error.message }, 'error while shutting down');
            process.exit(1);
          },
        );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    await starting;
  });
}

/**
 * BATCHWISE_MODEL_REPOSITORY_KEY restricts the model-repository group with header
 * `batchwise-key`, so the key can come from a secret store without appearing on a command line.
 */
function withKeyFromEnvironment(specs: string[] | undefined): string[] {
  const key = process.env['BATCHWISE_MODEL_REPOSITORY_KEY'];
  return [...(specs ?? []), ...(key ? [`model-repository:batchwise-key=${key}`] : [])];
}
