import { CfnOutput, Duration, Stack } from 'aws-cdk-lib';
import type { StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import type { Construct } from 'constructs';
import { AccessLogs } from './access-logs.ts';
import { CiAccess } from './ci-access.ts';
import type { GpuAmiVariant } from './gpu-capacity.ts';
import { imageFromUri, SERVER_PORTS } from './inference-service.ts';
import type { ManyModelsOptions } from './many-models.ts';
import { LoadBalancer } from './load-balancer.ts';
import { ModelGroupService } from './model-group.ts';
import { defaultGroupOf, modelFilterFlags, planRoutes } from './model-groups.ts';
import type { ModelGroup } from './model-groups.ts';
import { ModelRouting } from './model-routing.ts';
import { ModelStore } from './model-store.ts';
import { Network } from './network.ts';
import { Notifications } from './notifications.ts';
import { SERVER_IMAGE_ENVIRONMENT, serverImageFromRepository, type ServerImageTarget } from './server-image.ts';
import { addMonitoring, addServing, planServing } from './serving-group.ts';
import type { ServingEnvironment, ServingSettings } from './serving-group.ts';
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
   * the container's NVIDIA driver capabilities to include graphics. With imageUri, name the
   * SERVER_IMAGE that image was built with.
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
  /**
   * Model groups (model-groups.ts): the repository's models split across services, each group its own
   * capacity, service, target groups, alarms and dashboard, the load balancer routing each model to
   * its group. The settings above are every group's defaults.
   * @default - one service for every model
   */
  readonly modelGroups?: readonly ModelGroup[];
  /**
   * With modelGroups: the account's "Rules per Application Load Balancer" quota, when AWS raised it.
   * @default 100 (the default quota)
   */
  readonly albRuleQuota?: number;
}

/** Batchwise on ECS on GPU instances behind an ALB, with alarms, dashboard and CI access. */
export class BatchwiseStack extends Stack {
  constructor(scope: Construct, id: string, props: BatchwiseStackProps) {
    super(scope, id, props);
    const envName = props.envName ?? 'dev';
    const minCapacity = props.minCapacity ?? 1;
    const settings: ServingSettings = {
      instanceType: props.instanceType ?? 'g4dn.xlarge',
      memoryLimitMiB: props.memoryLimitMiB,
      memoryReservationMiB: props.memoryReservationMiB,
      gpuMemoryMiB: props.gpuMemoryMiB,
      minCapacity,
      maxCapacity: props.maxCapacity ?? 4,
      targetPendingRequestsPerTask: props.targetPendingRequestsPerTask,
      evictionsPerTaskPerMinute: props.evictionsPerTaskPerMinute,
      tracing: props.tracing,
      loadOnDemand: props.loadOnDemand,
      modelMemoryLimitMiB: props.modelMemoryLimitMiB,
      modelGpuMemoryLimitMiB: props.modelGpuMemoryLimitMiB,
      modelCacheDiskGiB: props.modelCacheDiskGiB,
    };
    const plan = props.modelGroups ? undefined : planServing(settings);
    const metricsServiceName = `batchwise-${envName}`;

    const accessLogs = new AccessLogs(this, 'AccessLogs');
    const network = new Network(this, 'Network', { natGateways: props.natGateways, flowLogBucket: accessLogs.bucket });
    const notifications = new Notifications(this, 'Notifications', { alarmEmail: props.alarmEmail });
    const modelStore = new ModelStore(this, 'ModelStore', {
      bucketName: props.modelBucketName,
      prefix: props.modelPrefix,
      accessLogsBucket: accessLogs.bucket,
    });
    // The image and the scraper's group are imported when the first service reads them, after its
    // capacity, where the single service always imported them: the order of constructs is the template's.
    const stack = this;
    let image: ecs.ContainerImage | undefined;
    let scraper: ec2.ISecurityGroup | undefined;
    const serverImage = props.serverImage ?? 'cuda';
    const environment: ServingEnvironment = {
      vpc: network.vpc,
      notificationTopic: notifications.topic,
      modelStore,
      get image() {
        return (image ??= props.imageUri ? imageFromUri(stack, props.imageUri) : serverImageFromRepository(undefined, serverImage));
      },
      imageEnvironment: SERVER_IMAGE_ENVIRONMENT[serverImage],
      amiVariant: props.amiVariant,
      amiId: props.amiId,
      healthCheckGracePeriod:
        props.healthCheckGracePeriodSeconds === undefined ? undefined : Duration.seconds(props.healthCheckGracePeriodSeconds),
      metricsScraperCidr: props.metricsScraperCidr,
      get metricsScraperSecurityGroup() {
        const id = props.metricsScraperSecurityGroupId;
        return id === undefined ? undefined : (scraper ??= ec2.SecurityGroup.fromSecurityGroupId(stack, 'MetricsScraper', id));
      },
      enableExecuteCommand: props.enableExecuteCommand,
    };
    const httpListenerProtocol = props.httpListenerProtocol === 'HTTP' ? elbv2.ApplicationProtocol.HTTP : elbv2.ApplicationProtocol.HTTPS;
    const loadBalancerProps = {
      vpc: network.vpc,
      certificateArn: props.certificateArn,
      httpListenerProtocol,
      allowedIngressCidr: props.allowedIngressCidr,
      wafRateLimitPer5Minutes: props.wafRateLimitPer5Minutes,
      accessLogsBucket: accessLogs.bucket,
    };
    const shared = {
      topic: notifications.topic,
      latencyP99Threshold: props.latencyP99AlarmMs === undefined ? undefined : Duration.millis(props.latencyP99AlarmMs),
    };
    const oomLogGroupName = `/aws/events/batchwise-${envName}-oom-kills`;

    let cluster: ecs.ICluster;
    let lb: LoadBalancer;
    /** The single service's outputs (with model groups, the ModelGroups output says the same per group). */
    let single: { dashboardName: string; serviceName: string } | undefined;
    if (plan) {
      // One service for every model: its constructs at the stack's top level, as they always were.
      const parts = addServing(this, environment, settings, plan, metricsServiceName);
      cluster = parts.capacity.cluster;
      lb = new LoadBalancer(this, 'LoadBalancer', { ...loadBalancerProps, service: parts.inference.service });
      const { dashboard } = addMonitoring(
        this,
        parts,
        plan,
        settings,
        { http: lb.httpTargetGroup, grpc: lb.grpcTargetGroup },
        { metricsServiceName, dashboardName: `batchwise-${envName}` },
        { ...shared, oomKills: { logGroupName: oomLogGroupName }, loadBalancer: lb.loadBalancer },
      );
      single = { dashboardName: dashboard.dashboard.dashboardName, serviceName: parts.inference.service.serviceName };
    } else {
      // Checked against the ALB's limits before anything is built. The plain-HTTP listener's refusals of
      // the model-repository API come first (priorities 1 and 2).
      let routes;
      try {
        routes = planRoutes(props.modelGroups!, httpListenerProtocol === elbv2.ApplicationProtocol.HTTP ? 2 : 0, props.albRuleQuota);
      } catch (error) {
        throw new Error(`modelGroups: ${(error as Error).message}`);
      }
      const groups = this.addModelGroups(props.modelGroups!, settings, environment, envName);
      const fallbackGroup = defaultGroupOf(props.modelGroups!);
      const fallback = groups.find((g) => g.group === fallbackGroup)!;
      cluster = groups[0]!.service.parts.capacity.cluster;
      lb = new LoadBalancer(this, 'LoadBalancer', { ...loadBalancerProps, targetGroups: fallback.service.targetGroups });
      new ModelRouting(this, 'ModelRouting', {
        httpListener: lb.httpListener,
        grpcListener: lb.grpcListener,
        plan: routes,
        targetGroups: new Map(groups.map((g) => [g.group.name, g.service.targetGroups])),
      });
      // The cluster's OOM kills and the load balancer's own 5xx are alarmed once, with the default group.
      const made = fallback.service.addMonitoring({
        ...shared,
        oomKills: { logGroupName: oomLogGroupName },
        loadBalancer: lb.loadBalancer,
      });
      for (const g of groups) if (g !== fallback) g.service.addMonitoring({ ...shared, oomKills: { metric: made.alarms.oomKillsMetric } });
      new CfnOutput(this, 'ModelGroups', {
        // Not the models: a long list would pass an output's size (the environment file has them).
        description: 'Each model group: its ECS service, EMF ServiceName and dashboard, and which is the default',
        value: this.toJsonString(
          Object.fromEntries(
            groups.map((g) => [
              g.group.name,
              {
                default: g === fallback,
                service: g.service.parts.inference.service.serviceName,
                metricsServiceName: g.metricsServiceName,
                dashboard: g.dashboardName,
              },
            ]),
          ),
        ),
      });
      new CfnOutput(this, 'MetricsServiceNames', {
        description: "The groups' EMF ServiceNames, for the promotion workflow's BATCHWISE_SERVICE_NAME",
        value: groups.map((g) => g.metricsServiceName).join(','),
      });
    }

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
    if (single) new CfnOutput(this, 'DashboardName', { value: single.dashboardName });
    new CfnOutput(this, 'ClusterName', { value: cluster.clusterName });
    if (single) new CfnOutput(this, 'ServiceName', { value: single.serviceName });
    if (ci) new CfnOutput(this, 'CiRoleArn', { value: ci.role.roleArn });
  }

  /**
   * One service per model group, in the order given; each group's settings are the stack's where it
   * has none of its own (the memory overrides only while it keeps the stack's instance type). They
   * share the cluster the first group's capacity makes.
   */
  private addModelGroups(
    modelGroups: readonly ModelGroup[],
    stack: ServingSettings,
    environment: ServingEnvironment,
    envName: string,
  ): { group: ModelGroup; service: ModelGroupService; metricsServiceName: string; dashboardName: string }[] {
    let cluster: ecs.Cluster | undefined;
    return modelGroups.map((group) => {
      const ownType = group.instanceType !== undefined && group.instanceType !== stack.instanceType;
      const minCapacity = group.minCapacity ?? stack.minCapacity;
      const loadOnDemand = group.loadOnDemand ?? stack.loadOnDemand;
      const settings: ServingSettings = {
        ...stack,
        instanceType: group.instanceType ?? stack.instanceType,
        ...(ownType && { memoryLimitMiB: undefined, memoryReservationMiB: undefined, gpuMemoryMiB: undefined }),
        minCapacity,
        maxCapacity: group.maxCapacity ?? Math.max(stack.maxCapacity, minCapacity),
        targetPendingRequestsPerTask: group.targetPendingRequestsPerTask ?? stack.targetPendingRequestsPerTask,
        loadOnDemand,
        modelMemoryLimitMiB: group.modelMemoryLimitMiB ?? stack.modelMemoryLimitMiB,
        evictionsPerTaskPerMinute: loadOnDemand ? stack.evictionsPerTaskPerMinute : undefined,
        serveFlags: modelFilterFlags(group),
      };
      if (settings.minCapacity > settings.maxCapacity) {
        throw new Error(
          `modelGroups: group '${group.name}': minCapacity (${settings.minCapacity}) must not exceed maxCapacity (${settings.maxCapacity}).`,
        );
      }
      let plan;
      try {
        plan = planServing(settings);
      } catch (error) {
        throw new Error(`modelGroups: group '${group.name}': ${(error as Error).message}`);
      }
      const metricsServiceName = `batchwise-${envName}-${group.name}`;
      const dashboardName = `batchwise-${envName}-${group.name}`;
      const service = new ModelGroupService(this, `ModelGroup-${group.name}`, {
        group,
        environment,
        settings,
        plan,
        metricsServiceName,
        dashboardName,
        cluster,
      });
      cluster ??= service.parts.capacity.cluster;
      return { group, service, metricsServiceName, dashboardName };
    });
  }
}
