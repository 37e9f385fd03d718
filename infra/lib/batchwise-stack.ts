import { CfnOutput, Duration, Stack } from 'aws-cdk-lib';
import type { StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import type { Construct } from 'constructs';
import { AccessLogs } from './access-logs.ts';
import { Alarms } from './alarms.ts';
import { CiAccess } from './ci-access.ts';
import { Dashboard } from './dashboard.ts';
import { GpuCapacity } from './gpu-capacity.ts';
import type { GpuAmiVariant } from './gpu-capacity.ts';
import { InferenceService, imageFromUri, SERVER_PORTS } from './inference-service.ts';
import { GPU_INSTANCE_TYPES, taskMemoryFor } from './instance-types.ts';
import { DEFAULT_EVICTIONS_PER_TASK_PER_MINUTE, hardLimitForModelsMiB, planManyModels } from './many-models.ts';
import type { ManyModelsOptions } from './many-models.ts';
import { LoadBalancer } from './load-balancer.ts';
import { ModelStore } from './model-store.ts';
import { Network } from './network.ts';
import { Notifications } from './notifications.ts';
import { SERVER_IMAGE_ENVIRONMENT, serverImageFromRepository, type ServerImageTarget } from './server-image.ts';
import { COLLECTOR_MEMORY_MIB } from './tracing.ts';
import type { TracingOptions } from './tracing.ts';

export interface BatchwiseStackProps extends StackProps, ManyModelsOptions {
  /** ACM certificate for the HTTPS listeners (gRPC on :8001 always; :8000 when HTTPS). */
  readonly certificateArn: string;
  /**
   * Short environment name; names the EMF `ServiceName`, the dashboard and the OOM log group.
   * @default 'dev'
   */
  readonly envName?: string;
  /** @default 'g4dn.xlarge' */
  readonly instanceType?: string;
  /**
   * Container hard limit, MiB. Required for instance types outside the table.
   * @default - derived from the instance type (see instance-types.ts)
   */
  readonly memoryLimitMiB?: number;
  /** @default - 85% of the hard limit */
  readonly memoryReservationMiB?: number;
  /** GPU memory for instance types outside the table. @default 16384 */
  readonly gpuMemoryMiB?: number;
  /** Fewest tasks; also what a new service scales to first (it carries no desired count). @default 1 */
  readonly minCapacity?: number;
  /** @default 4 */
  readonly maxCapacity?: number;
  /** @default - a new versioned bucket */
  readonly modelBucketName?: string;
  /** @default 'models' */
  readonly modelPrefix?: string;
  /** @default - built from the repository's Dockerfile as an asset */
  readonly imageUri?: string;
  /**
   * Which of the Dockerfile's images: 'webgpu' (no CUDA; for models on the webgpu accelerator) sets
   * the container's NVIDIA driver capabilities to include graphics. With imageUri, name the target
   * that image was built from.
   * @default 'cuda'
   */
  readonly serverImage?: ServerImageTarget;
  /** @default - no e-mail subscription */
  readonly alarmEmail?: string;
  /** @default 'al2023' */
  readonly amiVariant?: GpuAmiVariant;
  /** @default - resolved from the SSM public parameter on every deploy */
  readonly amiId?: string;
  /** 'HTTP' is an explicit choice: the load balancer then refuses the model-repository API on :8000. @default 'HTTPS' */
  readonly httpListenerProtocol?: 'HTTP' | 'HTTPS';
  /** Who may reach :8000 and :8001 ('0.0.0.0/0': public, on purpose). Required: no default. */
  readonly allowedIngressCidr: string;
  /** Requests per client IP per 5 minutes before AWS WAF blocks it. @default 20000 */
  readonly wafRateLimitPer5Minutes?: number;
  /** @default - no scraper access to :8002 */
  readonly metricsScraperCidr?: string;
  /** @default - no scraper access to :8002 */
  readonly metricsScraperSecurityGroupId?: string;
  /** @default - no CI role */
  readonly githubRepo?: string;
  /** @default 'main' */
  readonly githubBranch?: string;
  /** @default - a GitHub OIDC provider is created */
  readonly githubOidcProviderArn?: string;
  /**
   * Trust GitHub OIDC subjects that carry the ref (the repository's OIDC subject customised to
   * `repo, context, ref`), so the role checks the branch itself, not only the environment.
   * @default false
   */
  readonly githubOidcRefInSubject?: boolean;
  /** @default 1 */
  readonly natGateways?: number;
  /** @default 600 */
  readonly healthCheckGracePeriodSeconds?: number;
  /** @default 16 */
  readonly targetPendingRequestsPerTask?: number;
  /** @default 500 */
  readonly latencyP99AlarmMs?: number;
  /** With loadOnDemand: evictions per task per minute above which the eviction thrash alarm fires. @default 30 */
  readonly evictionsPerTaskPerMinute?: number;
  /** ECS Exec into the server container. @default false */
  readonly enableExecuteCommand?: boolean;
  /**
   * OpenTelemetry traces: an ADOT collector sidecar in every task exporting to X-Ray (or where
   * the configuration in `collectorConfigParameterName` says), X-Ray permissions on the task role.
   * @default - no tracing
   */
  readonly tracing?: TracingOptions;
}

/** Batchwise on ECS on GPU instances behind an ALB, with alarms, dashboard and CI access. */
export class BatchwiseStack extends Stack {
  constructor(scope: Construct, id: string, props: BatchwiseStackProps) {
    super(scope, id, props);
    const envName = props.envName ?? 'dev';
    const instanceType = props.instanceType ?? 'g4dn.xlarge';
    // Outside the table, a model memory limit sizes the task: the models and the server's own reserve.
    const sizedForModels =
      GPU_INSTANCE_TYPES[instanceType] === undefined && props.memoryLimitMiB === undefined && props.modelMemoryLimitMiB !== undefined
        ? hardLimitForModelsMiB(props.modelMemoryLimitMiB)
        : undefined;
    const memory = taskMemoryFor(instanceType, {
      memoryLimitMiB: props.memoryLimitMiB ?? sizedForModels,
      memoryReservationMiB: props.memoryReservationMiB,
      gpuMemoryMiB: props.gpuMemoryMiB,
      sidecarMemoryMiB: props.tracing ? COLLECTOR_MEMORY_MIB : undefined,
    });
    const manyModels = planManyModels(memory, props);
    if (props.evictionsPerTaskPerMinute !== undefined && !manyModels.loadOnDemand) {
      throw new Error(
        'evictionsPerTaskPerMinute only applies with loadOnDemand (models are evicted only then): set loadOnDemand too, or drop it.',
      );
    }
    const minCapacity = props.minCapacity ?? 1;
    const maxCapacity = props.maxCapacity ?? 4;
    const metricsServiceName = `batchwise-${envName}`;

    const accessLogs = new AccessLogs(this, 'AccessLogs');
    const network = new Network(this, 'Network', { natGateways: props.natGateways, flowLogBucket: accessLogs.bucket });
    const notifications = new Notifications(this, 'Notifications', { alarmEmail: props.alarmEmail });
    const modelStore = new ModelStore(this, 'ModelStore', {
      bucketName: props.modelBucketName,
      prefix: props.modelPrefix,
      accessLogsBucket: accessLogs.bucket,
    });

    // One task per GPU; a rolling deploy (maxHealthyPercent 200) briefly needs twice the GPUs.
    const capacity = new GpuCapacity(this, 'GpuCapacity', {
      vpc: network.vpc,
      instanceType,
      minInstances: Math.ceil(minCapacity / memory.gpuCount),
      maxInstances: Math.ceil((2 * maxCapacity) / memory.gpuCount),
      amiVariant: props.amiVariant,
      amiId: props.amiId,
      notificationTopic: notifications.topic,
      rootVolumeGiB: manyModels.rootVolumeGiB,
    });

    const serverImage = props.serverImage ?? 'cuda';
    const image = props.imageUri ? imageFromUri(this, props.imageUri) : serverImageFromRepository(undefined, serverImage);

    const inference = new InferenceService(this, 'Inference', {
      cluster: capacity.cluster,
      capacityProvider: capacity.capacityProvider,
      modelStore,
      memory,
      image,
      imageEnvironment: SERVER_IMAGE_ENVIRONMENT[serverImage],
      metricsServiceName,
      minCapacity,
      maxCapacity,
      targetPendingRequestsPerTask: props.targetPendingRequestsPerTask,
      healthCheckGracePeriod:
        props.healthCheckGracePeriodSeconds === undefined ? undefined : Duration.seconds(props.healthCheckGracePeriodSeconds),
      metricsScraperCidr: props.metricsScraperCidr,
      metricsScraperSecurityGroup: props.metricsScraperSecurityGroupId
        ? ec2.SecurityGroup.fromSecurityGroupId(this, 'MetricsScraper', props.metricsScraperSecurityGroupId)
        : undefined,
      enableExecuteCommand: props.enableExecuteCommand,
      tracing: props.tracing,
      serveFlags: manyModels.serveFlags,
    });

    const lb = new LoadBalancer(this, 'LoadBalancer', {
      vpc: network.vpc,
      service: inference.service,
      certificateArn: props.certificateArn,
      httpListenerProtocol: props.httpListenerProtocol === 'HTTP' ? elbv2.ApplicationProtocol.HTTP : elbv2.ApplicationProtocol.HTTPS,
      allowedIngressCidr: props.allowedIngressCidr,
      wafRateLimitPer5Minutes: props.wafRateLimitPer5Minutes,
      accessLogsBucket: accessLogs.bucket,
    });

    const alarms = new Alarms(this, 'Alarms', {
      topic: notifications.topic,
      cluster: capacity.cluster,
      service: inference.service,
      httpTargetGroup: lb.httpTargetGroup,
      grpcTargetGroup: lb.grpcTargetGroup,
      loadBalancer: lb.loadBalancer,
      metricsServiceName,
      memoryHardLimitMiB: memory.hardLimitMiB,
      gpuMemoryMiB: memory.gpuMemoryMiB,
      oomLogGroupName: `/aws/events/batchwise-${envName}-oom-kills`,
      healthCheckGracePeriod: inference.healthCheckGracePeriod,
      latencyP99Threshold: props.latencyP99AlarmMs === undefined ? undefined : Duration.millis(props.latencyP99AlarmMs),
      evictionsPerTaskPerMinute: manyModels.loadOnDemand
        ? (props.evictionsPerTaskPerMinute ?? DEFAULT_EVICTIONS_PER_TASK_PER_MINUTE)
        : undefined,
    });
    const dashboard = new Dashboard(this, 'Dashboard', {
      dashboardName: `batchwise-${envName}`,
      cluster: capacity.cluster,
      service: inference.service,
      httpTargetGroup: lb.httpTargetGroup,
      grpcTargetGroup: lb.grpcTargetGroup,
      metricsServiceName,
      alarms,
      memoryHardLimitMiB: memory.hardLimitMiB,
    });

    const ci = props.githubRepo
      ? new CiAccess(this, 'CiAccess', {
          githubRepo: props.githubRepo,
          githubBranch: props.githubBranch,
          githubEnvironment: envName,
          githubOidcProviderArn: props.githubOidcProviderArn,
          refInSubject: props.githubOidcRefInSubject,
          modelStore,
          repositoryKey: modelStore.repositoryKey,
        })
      : undefined;

    const dns = lb.loadBalancer.loadBalancerDnsName;
    const httpScheme = props.httpListenerProtocol === 'HTTP' ? 'http' : 'https';
    new CfnOutput(this, 'LoadBalancerDnsName', { value: dns, description: 'ALB DNS name' });
    new CfnOutput(this, 'HttpEndpoint', { value: `${httpScheme}://${dns}:${SERVER_PORTS.http}`, description: 'KServe v2 REST' });
    new CfnOutput(this, 'GrpcEndpoint', { value: `${dns}:${SERVER_PORTS.grpc}`, description: 'KServe v2 gRPC (TLS)' });
    new CfnOutput(this, 'ModelRepositoryUri', { value: modelStore.repositoryUri });
    new CfnOutput(this, 'RepositoryKeySecretArn', { value: modelStore.repositoryKey.secretArn });
    new CfnOutput(this, 'AlarmTopicArn', { value: notifications.topic.topicArn });
    new CfnOutput(this, 'DashboardName', { value: dashboard.dashboard.dashboardName });
    new CfnOutput(this, 'ClusterName', { value: capacity.cluster.clusterName });
    new CfnOutput(this, 'ServiceName', { value: inference.service.serviceName });
    if (ci) new CfnOutput(this, 'CiRoleArn', { value: ci.role.roleArn });
  }
}
