import { Aws, Duration, Size, Stack } from 'aws-cdk-lib';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as logs from 'aws-cdk-lib/aws-logs';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import { Construct } from 'constructs';
import { acknowledgeWildcardResource } from './nag.ts';

/** The AWS Distro for OpenTelemetry collector, pinned: a new tag is a reviewed change. */
export const ADOT_COLLECTOR_IMAGE = 'public.ecr.aws/aws-observability/aws-otel-collector:v0.47.0';

export const COLLECTOR_CONTAINER_NAME = 'otel-collector';

/**
 * Hard limit of the collector container, MiB, taken out of the task's memory (see taskMemoryFor)
 * so that server and collector together stay within what one task may use. A traces-only
 * pipeline with a small batch needs well under 100 MiB; the collector's memory_limiter refuses
 * spans before it reaches the limit.
 */
export const COLLECTOR_MEMORY_MIB = 256;

/** What the memory_limiter lets the collector hold: below the hard limit, leaving the Go runtime room. */
const COLLECTOR_LIMITER_MIB = 200;

/** The OTLP/HTTP receiver: loopback only, which in awsvpc mode is shared by the task's containers and nothing else. */
export const OTLP_HTTP_ENDPOINT = '127.0.0.1:4318';
export const OTLP_HTTP_TRACES_URL = `http://${OTLP_HTTP_ENDPOINT}/v1/traces`;

/** The collector's health_check extension; the image's `/healthcheck` binary asks 127.0.0.1:13133. */
const HEALTH_CHECK_ENDPOINT = '127.0.0.1:13133';

/** The variable the ADOT collector reads its whole configuration from when set. */
export const COLLECTOR_CONFIG_ENV = 'AOT_CONFIG_CONTENT';

/** Everything the awsxray exporter and X-Ray remote sampling call; X-Ray has no resource-level permissions. */
export const XRAY_ACTIONS = [
  'xray:PutTraceSegments',
  'xray:PutTelemetryRecords',
  'xray:GetSamplingRules',
  'xray:GetSamplingTargets',
  'xray:GetSamplingStatisticsSummary',
] as const;

/** @default rate of `serve --trace-config rate=`: one request in this many is traced. */
export const DEFAULT_TRACE_RATE = 1000;

export interface TracingOptions {
  /** One request in `rate` is traced (Triton's `--trace-config rate=`). */
  readonly rate: number;
  /**
   * Name of an SSM String parameter holding the whole collector configuration (YAML), instead of
   * the built-in OTLP-to-X-Ray one: to export to Jaeger or anything else the collector speaks.
   * @default - the built-in configuration (xrayCollectorConfig)
   */
  readonly collectorConfigParameterName?: string;
}

/**
 * The server's `serve` flags for tracing (Triton's `--trace-config` syntax): OpenTelemetry export
 * over OTLP/HTTP to the collector on loopback, one request in `rate`, with timestamps.
 */
export function serveTraceFlags(rate: number): string[] {
  return [
    '--trace-config',
    'mode=opentelemetry',
    '--trace-config',
    `opentelemetry,url=${OTLP_HTTP_TRACES_URL}`,
    '--trace-config',
    `rate=${rate}`,
    '--trace-config',
    'level=TIMESTAMPS',
  ];
}

/**
 * The built-in collector configuration: OTLP/HTTP in on loopback, X-Ray out in `region`. JSON,
 * which the collector reads as the YAML it is (YAML 1.2 contains JSON), so it stays one value
 * that tests and operators can parse.
 */
export function xrayCollectorConfig(region: string): Record<string, unknown> {
  return {
    extensions: { health_check: { endpoint: HEALTH_CHECK_ENDPOINT } },
    receivers: { otlp: { protocols: { http: { endpoint: OTLP_HTTP_ENDPOINT } } } },
    processors: {
      memory_limiter: { check_interval: '1s', limit_mib: COLLECTOR_LIMITER_MIB, spike_limit_mib: 50 },
      batch: { timeout: '1s', send_batch_size: 50 },
    },
    exporters: { awsxray: { region } },
    service: {
      extensions: ['health_check'],
      pipelines: { traces: { receivers: ['otlp'], processors: ['memory_limiter', 'batch'], exporters: ['awsxray'] } },
    },
  };
}

export interface TracingSidecarProps extends TracingOptions {
  readonly taskDefinition: ecs.TaskDefinition;
  /** The server container: it starts after the collector. */
  readonly serverContainer: ecs.ContainerDefinition;
  readonly logGroup: logs.ILogGroup;
}

/**
 * The ADOT collector beside the server in every task, and the X-Ray permissions on the task role.
 * The server exports its spans to it over loopback (serveTraceFlags).
 */
export class TracingSidecar extends Construct {
  readonly container: ecs.ContainerDefinition;
  readonly xrayPolicy: iam.Policy;

  constructor(scope: Construct, id: string, props: TracingSidecarProps) {
    super(scope, id);
    const custom = props.collectorConfigParameterName;
    this.container = props.taskDefinition.addContainer(COLLECTOR_CONTAINER_NAME, {
      image: ecs.ContainerImage.fromRegistry(ADOT_COLLECTOR_IMAGE),
      // Not essential: tracing is diagnosis, and a collector that dies must not stop a GPU task
      // that serves requests (the server only logs failed exports). ECS restarts it in place.
      essential: false,
      enableRestartPolicy: true,
      restartAttemptPeriod: Duration.seconds(60),
      memoryLimitMiB: COLLECTOR_MEMORY_MIB,
      memoryReservationMiB: COLLECTOR_MEMORY_MIB,
      environment: {
        AWS_REGION: Aws.REGION,
        ...(custom ? {} : { [COLLECTOR_CONFIG_ENV]: JSON.stringify(xrayCollectorConfig(Stack.of(this).region)) }),
      },
      secrets: custom
        ? {
            [COLLECTOR_CONFIG_ENV]: ecs.Secret.fromSsmParameter(
              ssm.StringParameter.fromStringParameterName(this, 'CollectorConfig', custom),
            ),
          }
        : undefined,
      logging: ecs.LogDrivers.awsLogs({
        logGroup: props.logGroup,
        streamPrefix: 'otel-collector',
        mode: ecs.AwsLogDriverMode.NON_BLOCKING,
        maxBufferSize: Size.mebibytes(4),
      }),
      healthCheck: {
        command: ['CMD', '/healthcheck'],
        interval: Duration.seconds(15),
        timeout: Duration.seconds(5),
        retries: 3,
        startPeriod: Duration.seconds(30),
      },
    });
    // START, not HEALTHY: the server must not wait on (or be held back by) diagnosis. Its first
    // spans come after the model download and warm-up, long after the collector listens.
    props.serverContainer.addContainerDependencies({ container: this.container, condition: ecs.ContainerDependencyCondition.START });

    this.xrayPolicy = new iam.Policy(this, 'XRayWrite', {
      statements: [new iam.PolicyStatement({ actions: [...XRAY_ACTIONS], resources: ['*'] })],
    });
    this.xrayPolicy.attachToRole(props.taskDefinition.taskRole);
    acknowledgeWildcardResource(
      this.xrayPolicy,
      '*',
      'X-Ray trace submission and sampling actions (PutTraceSegments, PutTelemetryRecords, GetSampling*) support no ' +
        'resource-level permissions; this policy holds only them, on the task role, with context tracing=xray.',
    );
  }
}
