import { fileURLToPath } from 'node:url';
import { CfnOutput, Duration, Stack } from 'aws-cdk-lib';
import type { StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import type { Construct } from 'constructs';
import { AccessLogs } from './access-logs.ts';
import { Alarms } from './alarms.ts';
import { CiAccess } from './ci-access.ts';
import { Dashboard } from './dashboard.ts';
import { GpuCapacity } from './gpu-capacity.ts';
import type { GpuAmiVariant } from './gpu-capacity.ts';
import { InferenceService, imageFromUri, SERVER_PORTS } from './inference-service.ts';
import { taskMemoryFor } from './instance-types.ts';
import { LoadBalancer } from './load-balancer.ts';
import { ModelStore } from './model-store.ts';
import { Network } from './network.ts';
import { Notifications } from './notifications.ts';

/** Repository root: the Docker build context of the server image. */
export const REPOSITORY_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface BatchwiseStackProps extends StackProps {
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
  /** @default - minCapacity */
  readonly desiredCount?: number;
  /** @default 1 */
  readonly minCapacity?: number;
  /** @default 4 */
  readonly maxCapacity?: number;
  /** @default - a new versioned bucket */
  readonly modelBucketName?: string;
  /** @default 'models' */
  readonly modelPrefix?: string;
  /** @default - built from the repository's Dockerfile as an asset */
  readonly imageUri?: string;
  /** @default - no e-mail subscription */
  readonly alarmEmail?: string;
  /** @default 'al2023' */
  readonly amiVariant?: GpuAmiVariant;
  /** @default - resolved from the SSM public parameter on every deploy */
  readonly amiId?: string;
  /** @default 'HTTP' */
  readonly httpListenerProtocol?: 'HTTP' | 'HTTPS';
  /** @default '0.0.0.0/0' */
  readonly allowedIngressCidr?: string;
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
  /** @default 1 */
  readonly natGateways?: number;
  /** @default 600 */
  readonly healthCheckGracePeriodSeconds?: number;
  /** @default 16 */
  readonly targetPendingRequestsPerTask?: number;
  /** @default 500 */
  readonly latencyP99AlarmMs?: number;
}

/** Batchwise on ECS on GPU instances behind an ALB, with alarms, dashboard and CI access. */
export class BatchwiseStack extends Stack {
  constructor(scope: Construct, id: string, props: BatchwiseStackProps) {
    super(scope, id, props);
    const envName = props.envName ?? 'dev';
    const instanceType = props.instanceType ?? 'g4dn.xlarge';
    const memory = taskMemoryFor(instanceType, {
      memoryLimitMiB: props.memoryLimitMiB,
      memoryReservationMiB: props.memoryReservationMiB,
      gpuMemoryMiB: props.gpuMemoryMiB,
    });
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
    });

    const image = props.imageUri
      ? imageFromUri(this, props.imageUri)
      : ecs.ContainerImage.fromAsset(REPOSITORY_ROOT, { file: 'Dockerfile', platform: Platform.LINUX_AMD64 });

    const inference = new InferenceService(this, 'Inference', {
      cluster: capacity.cluster,
      capacityProvider: capacity.capacityProvider,
      modelStore,
      memory,
      image,
      metricsServiceName,
      desiredCount: props.desiredCount,
      minCapacity,
      maxCapacity,
      targetPendingRequestsPerTask: props.targetPendingRequestsPerTask,
      healthCheckGracePeriod:
        props.healthCheckGracePeriodSeconds === undefined ? undefined : Duration.seconds(props.healthCheckGracePeriodSeconds),
      metricsScraperCidr: props.metricsScraperCidr,
      metricsScraperSecurityGroup: props.metricsScraperSecurityGroupId
        ? ec2.SecurityGroup.fromSecurityGroupId(this, 'MetricsScraper', props.metricsScraperSecurityGroupId)
        : undefined,
    });

    const lb = new LoadBalancer(this, 'LoadBalancer', {
      vpc: network.vpc,
      service: inference.service,
      certificateArn: props.certificateArn,
      httpListenerProtocol:
        props.httpListenerProtocol === 'HTTPS' ? elbv2.ApplicationProtocol.HTTPS : elbv2.ApplicationProtocol.HTTP,
      allowedIngressCidr: props.allowedIngressCidr,
      accessLogsBucket: accessLogs.bucket,
    });

    const alarms = new Alarms(this, 'Alarms', {
      topic: notifications.topic,
      cluster: capacity.cluster,
      service: inference.service,
      httpTargetGroup: lb.httpTargetGroup,
      grpcTargetGroup: lb.grpcTargetGroup,
      metricsServiceName,
      memoryHardLimitMiB: memory.hardLimitMiB,
      gpuMemoryMiB: memory.gpuMemoryMiB,
      oomLogGroupName: `/aws/events/batchwise-${envName}-oom-kills`,
      healthCheckGracePeriod: inference.healthCheckGracePeriod,
      latencyP99Threshold: props.latencyP99AlarmMs === undefined ? undefined : Duration.millis(props.latencyP99AlarmMs),
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
          modelStore,
          repositoryKey: modelStore.repositoryKey,
        })
      : undefined;

    const dns = lb.loadBalancer.loadBalancerDnsName;
    const httpScheme = props.httpListenerProtocol === 'HTTPS' ? 'https' : 'http';
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
