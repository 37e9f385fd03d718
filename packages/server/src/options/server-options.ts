import type { Logger } from 'pino';
import type { ModelControlMode } from '../models/model-manager.ts';

/**
 * What `startServer` takes. Each option a `batchwise serve` flag sets has its default, its flag
 * and its meaning in serve-flags.ts (docs/cli.md is generated from there); `resolveServerOptions`
 * fills in those defaults, so nothing below the declaration keeps a default of its own.
 */
export interface ServerOptions {
  readonly modelRepositories: readonly string[];
  /** Address every frontend binds unless given its own. */
  readonly host?: string;
  /** 0 picks a free port. */
  readonly httpPort?: number;
  readonly grpcPort?: number;
  readonly metricsPort?: number;
  readonly allowHttp?: boolean;
  readonly allowGrpc?: boolean;
  readonly allowMetrics?: boolean;
  readonly strictModelConfig?: boolean;
  readonly modelControlMode?: ModelControlMode;
  /** poll mode: seconds between repository polls. */
  readonly repositoryPollSecs?: number;
  /** explicit mode: models to load at start-up ('*' = all). */
  readonly loadModels?: readonly string[];
  /** --model-filter: the models (names, prefixes ending in *) this server serves of its repositories. @default every model */
  readonly modelFilter?: readonly string[];
  /** Requests load the models they name that are not loaded (and wait), in every control mode. */
  readonly loadOnDemand?: boolean;
  /** How long a request waits for its model to load, ms (its own timeout bounds it instead). */
  readonly loadOnDemandTimeoutMs?: number;
  /** After a failed load, its requests get the error at once this long before one tries again, ms (doubled by each failure in a row). */
  readonly loadOnDemandRetryMs?: number;
  /** Bytes ("8G", "512Mi", "8589934592"): host memory the loaded model versions may take; loads evict the least recently used to fit. @default no limit */
  readonly modelMemoryLimit?: string;
  /** Bytes: memory the loaded model versions may take on each GPU. @default no limit */
  readonly modelGpuMemoryLimit?: string;
  /** Bytes: disk the local cache of the s3:// repositories may take. @default no limit */
  readonly modelCacheDiskLimit?: string;
  /** Largest total size of the `file:` overrides of one repository load request, bytes. */
  readonly modelLoadFilesMaxBytes?: number;
  /** Repository load requests may bring code (JavaScript model files, node_modules, a switch to js). */
  readonly allowCodeOverrides?: boolean;
  readonly allowCpuFallback?: boolean;
  readonly maxBodyBytes?: number;
  /** Time allowed for a client to send a whole HTTP request, ms (no flag). @default 60000 */
  readonly requestTimeoutMs?: number;
  /** Idle HTTP keep-alive connections are closed after this long, ms; above the AWS ALB's 60 s idle timeout. */
  readonly httpKeepAliveTimeoutMs?: number;
  readonly grpcMaxMessageBytes?: number;
  /** Triton syntax `<api>[,<api>...]:<key>=<value>`, one entry per flag. */
  readonly httpRestrictedApi?: readonly string[];
  readonly grpcRestrictedProtocol?: readonly string[];
  /** Triton's --strict-readiness: ready only while every model is ready. */
  readonly strictReadiness?: boolean;
  /** Triton's --id: the server's name in its metadata. */
  readonly serverId?: string;
  /** Triton's --exit-on-error: a model that fails to load at start-up stops the server. */
  readonly exitOnError?: boolean;
  /** Bind addresses of the gRPC and metrics endpoints. @default host */
  readonly grpcHost?: string;
  readonly metricsHost?: string;
  /** gRPC keepalive ping interval and timeout, ms. */
  readonly grpcKeepaliveTimeMs?: number;
  readonly grpcKeepaliveTimeoutMs?: number;
  /** Triton's --grpc-max-connection-age(-grace), ms: connections are closed (GOAWAY) at this age. @default unlimited */
  readonly grpcMaxConnectionAgeMs?: number;
  readonly grpcMaxConnectionAgeGraceMs?: number;
  /** Triton's --allow-gpu-metrics: poll nvidia-smi for nv_gpu_* when a GPU is visible. */
  readonly gpuMetrics?: boolean;
  /** Triton's --allow-cpu-metrics: poll /proc for nv_cpu_* (Linux). */
  readonly cpuMetrics?: boolean;
  /** Triton's --metrics-interval-ms: how often GPU and CPU metrics are polled. */
  readonly metricsIntervalMs?: number;
  /** Triton's `--cache-config` values: `local,size=<bytes>` turns the response cache on. */
  readonly cacheConfig?: readonly string[];
  /** Triton's `--trace-config` values, e.g. `triton,file=/tmp/trace.json`, `rate=100`, `level=TIMESTAMPS`. */
  readonly traceConfig?: readonly string[];
  /** Triton's --rate-limit: 'execution_count' turns the rate limiter on. */
  readonly rateLimit?: 'off' | 'execution_count';
  /** Triton's --backend-config values, `<backend>,<setting>=<value>` (options/backend-config.ts). */
  readonly backendConfig?: readonly string[];
  /** Triton's --rate-limit-resource values, `<name>:<count>[:<device>]`. */
  readonly rateLimitResources?: readonly string[];
  /** Bytes ("12G"), a fraction of the container limit ("0.8"), or absent: 80% of the container (or machine) memory. */
  readonly memoryLimit?: string;
  /** Tensor elements one request may carry; more are refused with 400 / INVALID_ARGUMENT. @default one per 16 bytes of the memory budget */
  readonly maxRequestElements?: number;
  /** JavaScript heap limit of each model instance's worker thread, bytes (no flag). @default a quarter of the memory budget (64 MiB to 4 GiB) */
  readonly workerHeapLimitBytes?: number;
  /** Write CloudWatch embedded-metric-format lines to stdout every 10 s. */
  readonly cloudwatchMetrics?: boolean;
  /** The ServiceName dimension of those metrics. */
  readonly cloudwatchServiceName?: string;
  readonly logger?: Logger;
  /** Level of the logger made when none is given (no flag: the CLI makes its logger from the --log-* flags). @default 'info' */
  readonly logLevel?: string;
}

/** What `batchwise serve` sets beyond the server: its logger and how the process stops. */
export interface ProcessOptions {
  readonly logVerboseLevel?: number;
  readonly logInfo?: boolean;
  readonly logWarning?: boolean;
  readonly logError?: boolean;
  readonly logFormat?: 'default';
  /** On SIGTERM: still admitting requests this long after readiness goes false, ms. */
  readonly shutdownGraceMs?: number;
  /** On SIGTERM: time for in-flight work, grace included, before the process exits, ms. */
  readonly exitTimeoutMs?: number;
}

/** Everything `batchwise serve` flags set. */
export type ServeOptions = ServerOptions & ProcessOptions;
