/**
 * Every flag of `batchwise serve`, declared once: its name, its value, its default, what it
 * means and the option it becomes. The CLI is built from this list (cli/serve-command.ts), the
 * defaults of `startServer` come from it (resolve-options.ts), and docs/cli.md is generated from
 * it (`pnpm docs:cli`; a test fails when the file is out of date).
 */
import { ALLOW_CODE_OVERRIDES_FLAG } from '../models/code-overrides.ts';
import { DEFAULT_FILE_OVERRIDE_MAX_BYTES, FILE_OVERRIDE_LIMIT_FLAG } from '../models/load-parameters.ts';
import { CLOUDWATCH_METRICS_ENV, MODEL_REPOSITORY_KEY_ENV, MODEL_REPOSITORY_KEY_HEADER } from './environment.ts';
import type { ServeOptions } from './server-options.ts';
import { SERVER_NAME } from '../core/version.ts';

/**
 * How a flag's value is read: `bool` takes Triton's syntax (`--flag`, `--flag=false`,
 * `--flag 0`); `list` collects a repeated flag; `choice` is one of `choices`.
 */
export type FlagValueKind = 'port' | 'bool' | 'positive-integer' | 'number' | 'string' | 'list' | 'choice';

export interface FlagDeclaration {
  /** The flag, spelled as Triton spells it where Triton has it. */
  readonly flag: `--${string}`;
  /** The value as --help writes it (`<ms>`, `[bool]`). */
  readonly value: string;
  readonly kind: FlagValueKind;
  readonly choices?: readonly string[];
  readonly required?: true;
  /** The default, in the flag's own unit; absent when there is none or it is computed (see defaultText). */
  readonly default?: number | boolean | string | readonly string[];
  /** The default in words, where it is computed at start-up or follows another flag. */
  readonly defaultText?: string;
  readonly meaning: string;
  /** The option the value becomes. */
  readonly sets: keyof ServeOptions;
  /** From the flag's unit to the option's, and that in words for the reference. @default the value as it is */
  readonly toOption?: { readonly text: string; readonly apply: (value: never) => unknown };
  /**
   * With another flag that sets the same option: a later flag given replaces the value
   * (`replace`), or is ORed with it (`or`), or appended to it (`append`). @default 'replace'
   */
  readonly combine?: 'replace' | 'or' | 'append';
  /** An environment variable that turns a boolean flag on when it is `1` and the flag is not given. */
  readonly env?: string;
  /** Triton has a flag of this name that means the same. */
  readonly triton?: true;
}

/** One limit for an HTTP body and a gRPC message, so a request too large for one protocol is too large for both. */
const REQUEST_BYTES = 256 * 1024 * 1024;
const secondsToMs = { text: 'seconds × 1000', apply: (secs: number): number => secs * 1000 };

export const SERVE_FLAGS = [
  {
    flag: '--model-repository',
    value: '<path>',
    kind: 'list',
    required: true,
    sets: 'modelRepositories',
    triton: true,
    meaning: 'model repository folder (Triton layout) or s3:// location; repeat for several',
  },
  {
    flag: '--http-port',
    value: '<port>',
    kind: 'port',
    default: 8000,
    sets: 'httpPort',
    triton: true,
    meaning: 'port of the KServe v2 HTTP/REST endpoint (0 picks a free one)',
  },
  {
    flag: '--grpc-port',
    value: '<port>',
    kind: 'port',
    default: 8001,
    sets: 'grpcPort',
    triton: true,
    meaning: 'port of the KServe v2 / Triton gRPC endpoint (0 picks a free one)',
  },
  {
    flag: '--metrics-port',
    value: '<port>',
    kind: 'port',
    default: 8002,
    sets: 'metricsPort',
    triton: true,
    meaning: 'port of the Prometheus /metrics endpoint (0 picks a free one)',
  },
  {
    flag: '--http-address',
    value: '<address>',
    kind: 'string',
    default: '0.0.0.0',
    sets: 'host',
    triton: true,
    meaning: 'address the HTTP endpoint binds to (and gRPC and metrics unless given their own)',
  },
  {
    flag: '--grpc-address',
    value: '<address>',
    kind: 'string',
    defaultText: '--http-address',
    sets: 'grpcHost',
    triton: true,
    meaning: 'address the gRPC endpoint binds to',
  },
  {
    flag: '--metrics-address',
    value: '<address>',
    kind: 'string',
    defaultText: '--http-address',
    sets: 'metricsHost',
    triton: true,
    meaning: 'address the metrics endpoint binds to',
  },
  {
    flag: '--grpc-keepalive-time',
    value: '<ms>',
    kind: 'positive-integer',
    default: 30_000,
    sets: 'grpcKeepaliveTimeMs',
    triton: true,
    meaning: "interval of gRPC keepalive pings, idle connections included; below the load balancer's idle timeout (ALB: 60 s)",
  },
  {
    flag: '--grpc-keepalive-timeout',
    value: '<ms>',
    kind: 'positive-integer',
    default: 20_000,
    sets: 'grpcKeepaliveTimeoutMs',
    triton: true,
    meaning: 'time a keepalive ping may go unanswered before the connection is closed',
  },
  {
    flag: '--grpc-max-connection-age',
    value: '<ms>',
    kind: 'positive-integer',
    defaultText: 'unlimited',
    sets: 'grpcMaxConnectionAgeMs',
    triton: true,
    meaning: 'connections are sent GOAWAY at this age, so clients reconnect and spread over replicas',
  },
  {
    flag: '--grpc-max-connection-age-grace',
    value: '<ms>',
    kind: 'positive-integer',
    defaultText: 'unlimited',
    sets: 'grpcMaxConnectionAgeGraceMs',
    triton: true,
    meaning: 'time calls in flight get after a max-age GOAWAY before the connection is closed',
  },
  {
    // grpc-js's 4 MiB receive default is too small for an image batch; Triton's 2 GiB invites
    // host-memory OOM kills. 256 MiB holds a batch of 64×3×512×512 FP32 (201 MB).
    flag: '--grpc-max-message-bytes',
    value: '<bytes>',
    kind: 'positive-integer',
    default: REQUEST_BYTES,
    sets: 'grpcMaxMessageBytes',
    meaning: 'largest gRPC message received or sent (RESOURCE_EXHAUSTED beyond); Triton has no such flag and allows 2 GiB',
  },
  {
    flag: '--allow-http',
    value: '[bool]',
    kind: 'bool',
    default: true,
    sets: 'allowHttp',
    triton: true,
    meaning: 'serve HTTP/REST (Triton syntax: --allow-http=false disables)',
  },
  { flag: '--allow-grpc', value: '[bool]', kind: 'bool', default: true, sets: 'allowGrpc', triton: true, meaning: 'serve gRPC' },
  {
    flag: '--allow-metrics',
    value: '[bool]',
    kind: 'bool',
    default: true,
    sets: 'allowMetrics',
    triton: true,
    meaning: 'serve Prometheus metrics',
  },
  {
    flag: '--allow-gpu-metrics',
    value: '[bool]',
    kind: 'bool',
    default: true,
    sets: 'gpuMetrics',
    triton: true,
    meaning: 'export nv_gpu_* metrics (polled from nvidia-smi) when a GPU is visible',
  },
  {
    flag: '--allow-cpu-metrics',
    value: '[bool]',
    kind: 'bool',
    default: true,
    sets: 'cpuMetrics',
    triton: true,
    meaning: "export Triton's nv_cpu_utilization, nv_cpu_memory_total_bytes and nv_cpu_memory_used_bytes (the host's, from /proc)",
  },
  {
    flag: '--metrics-interval-ms',
    value: '<ms>',
    kind: 'positive-integer',
    default: 5000,
    sets: 'metricsIntervalMs',
    triton: true,
    meaning: 'how often GPU and CPU metrics are polled (Triton: 2000)',
  },
  {
    flag: '--strict-model-config',
    value: '[bool]',
    kind: 'bool',
    default: false,
    sets: 'strictModelConfig',
    triton: true,
    meaning: 'require a complete config.pbtxt for every model; when false, missing parts are auto-completed from the ONNX model',
  },
  {
    flag: '--disable-auto-complete-config',
    value: '[bool]',
    kind: 'bool',
    default: false,
    sets: 'strictModelConfig',
    combine: 'or',
    triton: true,
    meaning: 'the same as --strict-model-config=true',
  },
  {
    flag: '--allow-cpu-fallback',
    value: '[bool]',
    kind: 'bool',
    default: false,
    sets: 'allowCpuFallback',
    meaning:
      'let a KIND_GPU model run on CPU when CUDA is unusable (logged as a warning and shown in its metadata); off by default, so such a model fails to load instead',
  },
  {
    flag: '--model-control-mode',
    value: '<mode>',
    kind: 'choice',
    choices: ['none', 'poll', 'explicit'],
    default: 'none',
    sets: 'modelControlMode',
    triton: true,
    meaning:
      'none: load everything at start-up; poll: also pick up changes every --repository-poll-secs; explicit: load and unload through the repository API',
  },
  {
    flag: '--repository-poll-secs',
    value: '<secs>',
    kind: 'positive-integer',
    default: 15,
    sets: 'repositoryPollSecs',
    triton: true,
    meaning: 'poll mode: seconds between repository polls',
  },
  {
    flag: '--load-model',
    value: '<name>',
    kind: 'list',
    default: [],
    sets: 'loadModels',
    triton: true,
    meaning:
      "explicit mode, or any mode with --load-on-demand: a model to load at start-up ('*' for all), never evicted; repeat for several",
  },
  {
    flag: '--model-filter',
    value: '<names>',
    kind: 'list',
    default: [],
    sets: 'modelFilter',
    meaning:
      "serve only these models of the repositories: names and prefixes ending in * (resnet50,bert-*), comma-separated or repeated; any other model is never loaded and answers as unknown, and the repository index lists only these (a fleet's groups share one repository this way)",
  },
  {
    flag: '--load-on-demand',
    value: '[bool]',
    kind: 'bool',
    default: false,
    sets: 'loadOnDemand',
    meaning:
      "in every control mode, a request for a model of the repositories that is not loaded loads it and waits (requests for one model share one load); the start-up loads only --load-model's models, which stay pinned",
  },
  {
    flag: '--load-on-demand-timeout-secs',
    value: '<secs>',
    kind: 'number',
    default: 60,
    sets: 'loadOnDemandTimeoutMs',
    toOption: secondsToMs,
    meaning:
      "--load-on-demand: how long a request waits for its model to load (a request's own timeout parameter bounds it instead), and a load for models in use to make room; then 503 / UNAVAILABLE",
  },
  {
    flag: '--load-on-demand-retry-secs',
    value: '<secs>',
    kind: 'number',
    default: 10,
    sets: 'loadOnDemandRetryMs',
    toOption: secondsToMs,
    meaning:
      "--load-on-demand: after a model's load failed, its requests get that error at once for this long before one tries again; each failure in a row doubles it, up to 10 minutes",
  },
  {
    flag: '--model-memory-limit',
    value: '<bytes>',
    kind: 'string',
    defaultText: 'no limit',
    sets: 'modelMemoryLimit',
    meaning:
      'host memory the loaded model versions may take (8G, 512Mi, bytes; weights once per CPU instance, as the memory guard counts them): a load that needs room evicts the least recently used models loaded for requests with nothing queued or running, and a model larger than it fails to load',
  },
  {
    flag: '--model-gpu-memory-limit',
    value: '<bytes>',
    kind: 'string',
    defaultText: 'no limit',
    sets: 'modelGpuMemoryLimit',
    meaning: "the same on each GPU: memory the loaded versions' instances on it may take (weights once per instance)",
  },
  {
    flag: '--model-cache-disk-limit',
    value: '<bytes>',
    kind: 'string',
    defaultText: 'no limit',
    sets: 'modelCacheDiskLimit',
    meaning:
      's3:// repositories: disk their local cache may take; versions no model loads stay cached (a model evicted loads again without a download) until the least recently used are deleted to stay within it',
  },
  {
    flag: '--http-restricted-api',
    value: '<spec>',
    kind: 'list',
    default: [],
    sets: 'httpRestrictedApi',
    triton: true,
    meaning:
      'restrict API groups over HTTP: <api>[,<api>...]:<key>=<value> (groups: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging); repeat for several',
  },
  {
    flag: '--grpc-restricted-protocol',
    value: '<spec>',
    kind: 'list',
    default: [],
    sets: 'grpcRestrictedProtocol',
    triton: true,
    meaning: "the same for gRPC; clients send the header 'triton-grpc-protocol-<key>'",
  },
  {
    flag: '--cache-config',
    value: '<spec>',
    kind: 'list',
    default: [],
    defaultText: 'off',
    sets: 'cacheConfig',
    triton: true,
    meaning:
      'response cache, as Triton: local,size=<bytes> (at most half the memory budget); models opt in with response_cache { enable: true } in config.pbtxt, and identical requests (same inputs, same outputs asked for) are answered from memory, least recently used first out',
  },
  {
    flag: '--response-cache-byte-size',
    value: '<bytes>',
    kind: 'positive-integer',
    defaultText: 'off',
    sets: 'cacheConfig',
    combine: 'append',
    triton: true,
    toOption: { text: 'appends local,size=<bytes>', apply: (bytes: number) => [`local,size=${bytes}`] },
    meaning: "Triton's older form of --cache-config local,size=<bytes>",
  },
  {
    flag: '--trace-config',
    value: '<spec>',
    kind: 'list',
    default: [],
    defaultText: 'level=OFF, rate=1000',
    sets: 'traceConfig',
    triton: true,
    meaning:
      'request tracing, as Triton: [<mode>,]<key>=<value>, repeat for several; global keys level=OFF|TIMESTAMPS, rate=<1 in N>, count=<n, -1 = no limit>, mode=triton|opentelemetry; triton,file=<path> (only here, never over the API), triton,log-frequency=<traces per file, 0 = one file at shutdown>; opentelemetry,url=<OTLP HTTP traces endpoint, default http://localhost:4318/v1/traces>, opentelemetry,resource=<key>=<value>, opentelemetry,bsp_max_export_batch_size=<n>, opentelemetry,bsp_schedule_delay=<ms>, opentelemetry,bsp_max_queue_size=<n> (an opentelemetry key chooses mode opentelemetry)',
  },
  {
    flag: '--rate-limit',
    value: '<mode>',
    kind: 'choice',
    choices: ['off', 'execution_count'],
    default: 'off',
    sets: 'rateLimit',
    triton: true,
    meaning:
      "Triton's rate limiter: off runs a batch as soon as an instance is free; execution_count runs it only once the instance holds the resources its instance_group's rate_limiter names, instances waiting being served by priority (2 gets half the turns of 1)",
  },
  {
    flag: '--backend-config',
    value: '<backend>,<setting>=<value>',
    kind: 'list',
    default: [],
    sets: 'backendConfig',
    triton: true,
    meaning:
      "a backend's setting, as Triton takes it; applied: python,shm-default-byte-size and python,shm-growth-byte-size (each Python instance's shared-memory regions, 1 MiB each by default); any other is accepted and named in a start-up warning",
  },
  {
    flag: '--rate-limit-resource',
    value: '<name>:<count>[:<device>]',
    kind: 'list',
    default: [],
    defaultText: 'the largest count any loaded instance asks for',
    sets: 'rateLimitResources',
    triton: true,
    meaning:
      'copies of a rate limiter resource, on every device or on one device id (a global resource takes the count given without a device); repeat for several; a model asking for more fails to load',
  },
  {
    flag: '--log-verbose',
    value: '<level>',
    kind: 'number',
    default: 0,
    sets: 'logVerboseLevel',
    triton: true,
    meaning: 'verbose logging level: 0 = info, 1 or more = debug; logs are JSON lines (pino)',
  },
  { flag: '--log-info', value: '[bool]', kind: 'bool', default: true, sets: 'logInfo', triton: true, meaning: 'log info messages' },
  { flag: '--log-warning', value: '[bool]', kind: 'bool', default: true, sets: 'logWarning', triton: true, meaning: 'log warnings' },
  { flag: '--log-error', value: '[bool]', kind: 'bool', default: true, sets: 'logError', triton: true, meaning: 'log errors' },
  {
    flag: '--log-format',
    value: '<format>',
    kind: 'choice',
    choices: ['default'],
    default: 'default',
    sets: 'logFormat',
    triton: true,
    meaning: "log format: Batchwise logs JSON lines ('default')",
  },
  {
    flag: '--id',
    value: '<name>',
    kind: 'string',
    default: SERVER_NAME,
    sets: 'serverId',
    triton: true,
    meaning:
      "the server's name in its metadata (GET /v2, ServerMetadata); Triton's is 'triton', which its health_metadata examples check for",
  },
  {
    flag: '--strict-readiness',
    value: '[bool]',
    kind: 'bool',
    default: true,
    sets: 'strictReadiness',
    triton: true,
    meaning:
      'ready only while every model is ready (false: ready once start-up loading is done, so one broken model does not take the task out of the load balancer)',
  },
  {
    flag: '--exit-on-error',
    value: '[bool]',
    kind: 'bool',
    default: false,
    sets: 'exitOnError',
    triton: true,
    meaning:
      "exit at start-up when a model fails to load (Triton's default is true; Batchwise's is false: the others serve and the failure is reported)",
  },
  {
    flag: '--http-max-body-bytes',
    value: '<bytes>',
    kind: 'positive-integer',
    default: REQUEST_BYTES,
    sets: 'maxBodyBytes',
    meaning: 'largest request body accepted over HTTP; larger bodies are refused with 400 before they are read whole',
  },
  {
    flag: '--http-max-input-size',
    value: '<bytes>',
    kind: 'positive-integer',
    defaultText: '--http-max-body-bytes',
    sets: 'maxBodyBytes',
    triton: true,
    meaning: "Triton's name for --http-max-body-bytes (wins when both are given)",
  },
  {
    flag: '--max-request-elements',
    value: '<count>',
    kind: 'positive-integer',
    defaultText: 'one per 16 bytes of --memory-limit',
    sets: 'maxRequestElements',
    meaning:
      'most tensor elements one request may carry over HTTP or gRPC, counted before they are decoded; more get 400 / INVALID_ARGUMENT naming the count and the limit',
  },
  {
    flag: FILE_OVERRIDE_LIMIT_FLAG,
    value: '<bytes>',
    kind: 'positive-integer',
    default: DEFAULT_FILE_OVERRIDE_MAX_BYTES,
    sets: 'modelLoadFilesMaxBytes',
    meaning: "largest total size of the file overrides ('file:<version>/<name>' parameters, decoded) of one repository load request",
  },
  {
    flag: ALLOW_CODE_OVERRIDES_FLAG,
    value: '[bool]',
    kind: 'bool',
    default: false,
    sets: 'allowCodeOverrides',
    meaning:
      'explicit mode: let repository load requests bring code (file overrides of a backend "js" model, node_modules, a config override that switches a model to js); off by default, so they get 403 / PERMISSION_DENIED and only config and ONNX files arrive over the API',
  },
  {
    flag: '--memory-limit',
    value: '<bytes|fraction>',
    kind: 'string',
    defaultText: '0.8 of the cgroup limit, or of physical memory',
    sets: 'memoryLimit',
    meaning:
      'memory budget: bytes (12G, 512Mi, 12884901888) or a fraction of the container limit (0.8); requests that would exceed it get 503',
  },
  {
    flag: '--cloudwatch-metrics',
    value: '[bool]',
    kind: 'bool',
    default: false,
    env: CLOUDWATCH_METRICS_ENV,
    sets: 'cloudwatchMetrics',
    meaning: 'write CloudWatch embedded-metric-format lines to stdout every 10 s',
  },
  {
    flag: '--cloudwatch-service-name',
    value: '<name>',
    kind: 'string',
    default: 'batchwise',
    sets: 'cloudwatchServiceName',
    meaning: 'ServiceName dimension of the CloudWatch metrics',
  },
  {
    flag: '--shutdown-grace-secs',
    value: '<secs>',
    kind: 'number',
    default: 5,
    sets: 'shutdownGraceMs',
    toOption: secondsToMs,
    meaning:
      'on SIGTERM: readiness goes false at once, requests are still admitted this long (so the load balancer can deregister), then draining starts; ' +
      'a stop from a terminal (stdin is one) skips it unless this flag is given',
  },
  {
    flag: '--http-keep-alive-timeout-secs',
    value: '<secs>',
    kind: 'positive-integer',
    default: 65,
    sets: 'httpKeepAliveTimeoutMs',
    toOption: secondsToMs,
    meaning:
      'idle HTTP keep-alive connections are closed after this long; keep it above the load balancer idle timeout (AWS ALB: 60 s), or the balancer reuses a closing connection and answers 502',
  },
  {
    flag: '--exit-timeout-secs',
    value: '<secs>',
    kind: 'positive-integer',
    default: 30,
    sets: 'exitTimeoutMs',
    toOption: secondsToMs,
    triton: true,
    meaning:
      'on SIGTERM, time allowed (grace included) for in-flight requests and gRPC streams; streams still open then end with UNAVAILABLE, and the process exits if draining takes longer',
  },
] as const satisfies readonly FlagDeclaration[];

/** Environment variables `batchwise serve` reads, for the reference. */
export const SERVE_ENVIRONMENT = [
  { name: CLOUDWATCH_METRICS_ENV, meaning: '`1` turns --cloudwatch-metrics on when the flag is not given' },
  {
    name: MODEL_REPOSITORY_KEY_ENV,
    meaning: `restricts the model-repository API group over HTTP and gRPC to requests with header \`${MODEL_REPOSITORY_KEY_HEADER}\` set to it, so the key can come from a secret store without appearing on a command line`,
  },
] as const;
