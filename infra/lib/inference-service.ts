import { Aws, Duration, RemovalPolicy, Size, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecr from 'aws-cdk-lib/aws-ecr';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { ModelStore } from './model-store.ts';
import type { TaskMemory } from './instance-types.ts';
import { MODEL_REPOSITORY_KEY_ENV, SERVER_METRICS, serverMetric } from './server-metrics.ts';
import { COLLECTOR_CONFIG_ENV, serveTraceFlags, TracingSidecar } from './tracing.ts';
import type { TracingOptions } from './tracing.ts';

/** Ports the server listens on (Triton's defaults). */
export const SERVER_PORTS = { http: 8000, grpc: 8001, metrics: 8002 } as const;

/** Non-root user the image creates (see the root Dockerfile). */
export const CONTAINER_USER = '10001:10001';

export const CONTAINER_NAME = 'server';

export interface InferenceServiceProps {
  readonly cluster: ecs.ICluster;
  readonly capacityProvider: ecs.AsgCapacityProvider;
  readonly modelStore: ModelStore;
  /** Per-task memory limits and server budget (see taskMemoryFor). */
  readonly memory: TaskMemory;
  /**
   * The container image. Use `ContainerImage.fromAsset` for the repository's Dockerfile.
   */
  readonly image: ecs.ContainerImage;
  /**
   * Environment variables the image needs (server-image.ts SERVER_IMAGE_ENVIRONMENT), beside AWS_REGION; no secrets.
   * @default - none
   */
  readonly imageEnvironment?: Readonly<Record<string, string>>;
  /** Value of the `ServiceName` dimension the server writes with its EMF metrics. */
  readonly metricsServiceName: string;
  /**
   * Fewest tasks autoscaling keeps. The service itself carries no desired count (CloudFormation
   * would send it again on every deploy and reset the count autoscaling chose): it is created
   * with one task and autoscaling raises it to this.
   * @default 1
   */
  readonly minCapacity?: number;
  /** @default 4 */
  readonly maxCapacity?: number;
  /**
   * Target of the service autoscaling: average `PendingRequests` (queued + executing) per task.
   * @default 16
   */
  readonly targetPendingRequestsPerTask?: number;
  /**
   * Time the load balancer health checks are ignored after a task starts: covers the
   * model download from S3, CUDA initialisation and warm-up.
   * @default Duration.minutes(10)
   */
  readonly healthCheckGracePeriod?: Duration;
  /**
   * Time between SIGTERM and SIGKILL, for in-flight batches to finish.
   * @default Duration.seconds(120)
   */
  readonly stopTimeout?: Duration;
  /**
   * CIDR that may scrape Prometheus metrics on :8002 (inside the VPC).
   * @default - none
   */
  readonly metricsScraperCidr?: string;
  /**
   * Security group that may scrape Prometheus metrics on :8002.
   * @default - none
   */
  readonly metricsScraperSecurityGroup?: ec2.ISecurityGroup;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /**
   * ECS Exec (`aws ecs execute-command`) into the server container, for diagnosis.
   * @default false
   */
  readonly enableExecuteCommand?: boolean;
  /**
   * OpenTelemetry traces through an ADOT collector sidecar (tracing.ts). Its memory must already
   * be taken out of `memory` (taskMemoryFor's collectorMemoryMiB).
   * @default - no tracing, no sidecar
   */
  readonly tracing?: TracingOptions;
  /**
   * Further `serve` flags: many models per host (`--load-on-demand` and the limits, many-models.ts).
   * @default - none
   */
  readonly serveFlags?: readonly string[];
}

/**
 * `serve` flags the stack decides, with why. Readiness is Triton's `--strict-readiness false`: a
 * task is ready once its start-up loading is done and until it shuts down, whatever state single
 * models are in. With strict readiness (the server's default) one model that loads slowly or
 * fails to load, picked up by every task's poll at once, made every task unready: the load
 * balancer dropped them all, ECS replaced them, and the replacements failed the same way. Failed
 * models are reported instead by the ModelsFailedToLoad metric and its alarm.
 */
export const SERVE_READINESS_FLAGS = ['--strict-readiness', 'false'] as const;

/** Healthy when `/v2/health/live` answers 200. The CUDA base image has no curl; node has fetch. */
export const CONTAINER_HEALTH_CHECK_SCRIPT =
  `fetch('http://127.0.0.1:${SERVER_PORTS.http}/v2/health/live')` + '.then(r=>process.exit(r.ok?0:1),()=>process.exit(1))';

/**
 * The image from a registry URI; ECR URIs get pull permissions for the execution role.
 */
export function imageFromUri(scope: Construct, uri: string): ecs.ContainerImage {
  const ecrMatch = /^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?\/([^:@]+)(?::([^@]+))?(?:@(sha256:[0-9a-f]{64}))?$/.exec(
    uri,
  );
  if (!ecrMatch) return ecs.ContainerImage.fromRegistry(uri);
  const [, account, region, name, tag, digest] = ecrMatch;
  const repository = ecr.Repository.fromRepositoryAttributes(scope, 'ImageRepository', {
    repositoryName: name!,
    repositoryArn: `arn:${Aws.PARTITION}:ecr:${region}:${account}:repository/${name}`,
  });
  return ecs.ContainerImage.fromEcrRepository(repository, digest ?? tag ?? 'latest');
}

/** The GPU task definition, its ECS service and the service's autoscaling on queue depth. */
export class InferenceService extends Construct {
  readonly taskDefinition: ecs.Ec2TaskDefinition;
  readonly container: ecs.ContainerDefinition;
  readonly service: ecs.Ec2Service;
  readonly logGroup: logs.LogGroup;
  readonly securityGroup: ec2.SecurityGroup;
  /** How long the service ignores failing load balancer health checks of a new task. */
  readonly healthCheckGracePeriod: Duration;
  /** The metric the service scales on, as the server publishes it. */
  readonly pendingRequestsMetric: cloudwatch.Metric;

  constructor(scope: Construct, id: string, props: InferenceServiceProps) {
    super(scope, id);
    const minCapacity = props.minCapacity ?? 1;
    const maxCapacity = props.maxCapacity ?? 4;
    for (const [name, value] of Object.entries({ minCapacity, maxCapacity })) {
      if (!Number.isInteger(value) || value < 1) {
        throw new Error(`${name} must be an integer >= 1, got ${value}.`);
      }
    }
    if (minCapacity > maxCapacity) {
      throw new Error(`minCapacity (${minCapacity}) must not exceed maxCapacity (${maxCapacity}).`);
    }
    const target = props.targetPendingRequestsPerTask ?? 16;
    if (!(target > 0)) {
      throw new Error(`targetPendingRequestsPerTask must be > 0, got ${target}.`);
    }
    const stopTimeout = props.stopTimeout ?? Duration.seconds(120);
    const grace = props.healthCheckGracePeriod ?? Duration.minutes(10);
    this.healthCheckGracePeriod = grace;

    this.logGroup = new logs.LogGroup(this, 'LogGroup', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });

    this.taskDefinition = new ecs.Ec2TaskDefinition(this, 'TaskDefinition', {
      networkMode: ecs.NetworkMode.AWS_VPC,
    });
    props.modelStore.grantReadRepository(this.taskDefinition.taskRole);

    this.container = this.taskDefinition.addContainer(CONTAINER_NAME, {
      image: props.image,
      // The image's ENTRYPOINT is the `batchwise` CLI; this is its argument list.
      command: [
        'serve',
        '--model-repository',
        props.modelStore.repositoryUri,
        '--model-control-mode',
        'poll',
        '--repository-poll-secs',
        '30',
        ...SERVE_READINESS_FLAGS,
        '--memory-limit',
        String(props.memory.serverBudgetBytes),
        '--cloudwatch-metrics',
        '--cloudwatch-service-name',
        props.metricsServiceName,
        ...(props.tracing ? serveTraceFlags(props.tracing.rate) : []),
        ...(props.serveFlags ?? []),
      ],
      gpuCount: 1,
      memoryLimitMiB: props.memory.hardLimitMiB,
      memoryReservationMiB: props.memory.reservationMiB,
      user: CONTAINER_USER,
      environment: { ...props.imageEnvironment, AWS_REGION: Aws.REGION },
      secrets: {
        [MODEL_REPOSITORY_KEY_ENV]: ecs.Secret.fromSecretsManager(props.modelStore.repositoryKey),
      },
      portMappings: [
        { name: 'http', containerPort: SERVER_PORTS.http, protocol: ecs.Protocol.TCP },
        { name: 'grpc', containerPort: SERVER_PORTS.grpc, protocol: ecs.Protocol.TCP },
        { name: 'metrics', containerPort: SERVER_PORTS.metrics, protocol: ecs.Protocol.TCP },
      ],
      logging: ecs.LogDrivers.awsLogs({
        logGroup: this.logGroup,
        streamPrefix: 'batchwise',
        // A slow CloudWatch Logs must not block the event loop on stdout writes.
        mode: ecs.AwsLogDriverMode.NON_BLOCKING,
        maxBufferSize: Size.mebibytes(25),
      }),
      healthCheck: {
        command: ['CMD', 'node', '-e', CONTAINER_HEALTH_CHECK_SCRIPT],
        interval: Duration.seconds(15),
        timeout: Duration.seconds(5),
        retries: 3,
        startPeriod: Duration.seconds(120),
      },
      stopTimeout,
      ulimits: [{ name: ecs.UlimitName.NOFILE, softLimit: 65536, hardLimit: 65536 }],
      // docker-init as PID 1: it passes signals on and reaps processes, so the server is not PID 1,
      // where the kernel drops the SIGTERM its forced exit sends itself (the CLI also copes alone).
      linuxParameters: new ecs.LinuxParameters(this, 'LinuxParameters', { initProcessEnabled: true }),
    });
    if (props.tracing) {
      new TracingSidecar(this, 'Tracing', {
        ...props.tracing,
        taskDefinition: this.taskDefinition,
        serverContainer: this.container,
        logGroup: this.logGroup,
      });
    }
    Validations.of(this.taskDefinition).acknowledge({
      id: 'AwsSolutions-ECS2',
      reason:
        'The plain environment variables are AWS_REGION (the ECS agent on EC2 does not set it for the AWS SDK) and the ' +
        "image's own (the webgpu image's NVIDIA_DRIVER_CAPABILITIES), which hold no secret; " +
        'the model-repository API key comes from Secrets Manager as an ECS secret.' +
        (props.tracing
          ? ` The tracing collector sidecar's are AWS_REGION and, with the built-in configuration, ${COLLECTOR_CONFIG_ENV}, which holds no secret.`
          : ''),
    });

    if (props.image instanceof ecs.EcrImage || props.image instanceof ecs.AssetImage) {
      Validations.of(this.taskDefinition.obtainExecutionRole()).acknowledge({
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason: 'ecr:GetAuthorizationToken has no resource-level permissions; image pulls are scoped to the repository.',
      });
    }

    this.securityGroup = new ec2.SecurityGroup(this, 'TaskSecurityGroup', {
      vpc: props.cluster.vpc,
      description: 'Batchwise tasks: HTTP 8000 and gRPC 8001 from the load balancer only; 8002 from the metrics scraper if configured',
      allowAllOutbound: true,
    });
    if (props.metricsScraperCidr !== undefined) {
      this.securityGroup.addIngressRule(ec2.Peer.ipv4(props.metricsScraperCidr), ec2.Port.tcp(SERVER_PORTS.metrics), 'Prometheus scraper');
    }
    if (props.metricsScraperSecurityGroup) {
      this.securityGroup.addIngressRule(props.metricsScraperSecurityGroup, ec2.Port.tcp(SERVER_PORTS.metrics), 'Prometheus scraper');
    }

    this.service = new ecs.Ec2Service(this, 'Service', {
      cluster: props.cluster,
      taskDefinition: this.taskDefinition,
      // No desiredCount: see minCapacity.
      capacityProviderStrategies: [{ capacityProvider: props.capacityProvider.capacityProviderName, weight: 1 }],
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      securityGroups: [this.securityGroup],
      // New tasks start (on new GPUs from managed scaling) before old ones stop.
      minHealthyPercent: 100,
      maxHealthyPercent: 200,
      circuitBreaker: { enable: true, rollback: true },
      healthCheckGracePeriod: grace,
      placementStrategies: [ecs.PlacementStrategy.spreadAcross(ecs.BuiltInAttributes.AVAILABILITY_ZONE)],
      propagateTags: ecs.PropagatedTagSource.SERVICE,
      enableExecuteCommand: props.enableExecuteCommand ?? false,
    });
    if (props.enableExecuteCommand) {
      Validations.of(this.taskDefinition.taskRole).acknowledge({
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'ECS Exec (context enableExecuteCommand, off by default): the ssmmessages channel actions the SSM agent ' +
          'in the task uses have no resource-level permissions.',
      });
    }

    // The cluster's capacity provider association (AWS::ECS::ClusterCapacityProviderAssociations)
    // is added to the cluster by an aspect at synth time; depending on the cluster construct
    // orders the service after it. Without it the service can be created before the
    // association ("capacity provider ... is not associated with the cluster") and CloudFormation
    // deletes the association while the service still uses it (aws/aws-cdk#19275, #18179).
    this.service.node.addDependency(props.cluster);

    this.pendingRequestsMetric = serverMetric(SERVER_METRICS.pendingRequests, props.metricsServiceName);
    const scaling = this.service.autoScaleTaskCount({ minCapacity, maxCapacity });
    // CPU says nothing about a batching GPU server; queue depth per task is what grows with load.
    scaling.scaleToTrackCustomMetric('PendingRequestsPerTask', {
      metric: this.pendingRequestsMetric,
      targetValue: target,
      scaleOutCooldown: Duration.minutes(1),
      scaleInCooldown: Duration.minutes(5),
    });
  }
}
