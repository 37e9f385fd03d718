import { Duration } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import type * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type { Construct } from 'constructs';
import { Alarms } from './alarms.ts';
import type { AlarmsProps } from './alarms.ts';
import { Dashboard } from './dashboard.ts';
import { GpuCapacity } from './gpu-capacity.ts';
import type { GpuAmiVariant } from './gpu-capacity.ts';
import { InferenceService } from './inference-service.ts';
import { GPU_INSTANCE_TYPES, taskMemoryFor } from './instance-types.ts';
import type { TaskMemory } from './instance-types.ts';
import { DEFAULT_EVICTIONS_PER_TASK_PER_MINUTE, hardLimitForModelsMiB, planManyModels } from './many-models.ts';
import type { ManyModelsOptions, ManyModelsPlan } from './many-models.ts';
import type { ModelStore } from './model-store.ts';
import { COLLECTOR_MEMORY_MIB } from './tracing.ts';
import type { TracingOptions } from './tracing.ts';

/**
 * One serving group: GPU capacity, the inference service on it and their alarms and dashboard. The
 * stack without model groups is one of these; with `modelGroups`, each group is one (model-group.ts).
 * Built by functions in the scope they are given, so the single service keeps the construct paths,
 * and with them the logical ids, it always had.
 */
export interface ServingSettings extends ManyModelsOptions {
  readonly instanceType: string;
  /** @default - derived from the instance type */
  readonly memoryLimitMiB?: number;
  /** @default - 85% of the hard limit */
  readonly memoryReservationMiB?: number;
  /** @default - from the instance type table (16384 otherwise) */
  readonly gpuMemoryMiB?: number;
  readonly minCapacity: number;
  readonly maxCapacity: number;
  /** @default 16 (InferenceService) */
  readonly targetPendingRequestsPerTask?: number;
  /** With loadOnDemand: the eviction thrash alarm's threshold. @default DEFAULT_EVICTIONS_PER_TASK_PER_MINUTE */
  readonly evictionsPerTaskPerMinute?: number;
  /** @default - no tracing */
  readonly tracing?: TracingOptions;
  /** `serve` flags beyond the many-models ones (a group's --model-filter). @default - none */
  readonly serveFlags?: readonly string[];
}

/** What a group's settings decide before anything is built: the task's memory and the many-models plan. */
export interface ServingPlan {
  readonly memory: TaskMemory;
  readonly manyModels: ManyModelsPlan;
}

export function planServing(settings: ServingSettings): ServingPlan {
  // Outside the table, a model memory limit sizes the task: the models and the server's own reserve.
  const sizedForModels =
    GPU_INSTANCE_TYPES[settings.instanceType] === undefined &&
    settings.memoryLimitMiB === undefined &&
    settings.modelMemoryLimitMiB !== undefined
      ? hardLimitForModelsMiB(settings.modelMemoryLimitMiB)
      : undefined;
  const memory = taskMemoryFor(settings.instanceType, {
    memoryLimitMiB: settings.memoryLimitMiB ?? sizedForModels,
    memoryReservationMiB: settings.memoryReservationMiB,
    gpuMemoryMiB: settings.gpuMemoryMiB,
    sidecarMemoryMiB: settings.tracing ? COLLECTOR_MEMORY_MIB : undefined,
  });
  const manyModels = planManyModels(memory, settings);
  if (settings.evictionsPerTaskPerMinute !== undefined && !manyModels.loadOnDemand) {
    throw new Error(
      'evictionsPerTaskPerMinute only applies with loadOnDemand (models are evicted only then): set loadOnDemand too, or drop it.',
    );
  }
  return { memory, manyModels };
}

/** What every group's service shares: the network, the repository, the image, the alarm topic and the settings of the stack. */
export interface ServingEnvironment {
  readonly vpc: ec2.IVpc;
  readonly notificationTopic: sns.ITopic;
  readonly modelStore: ModelStore;
  readonly image: ecs.ContainerImage;
  /** Environment variables the image needs (server-image.ts SERVER_IMAGE_ENVIRONMENT). @default - none */
  readonly imageEnvironment?: Readonly<Record<string, string>>;
  readonly amiVariant?: GpuAmiVariant;
  readonly amiId?: string;
  readonly healthCheckGracePeriod?: Duration;
  readonly metricsScraperCidr?: string;
  readonly metricsScraperSecurityGroup?: ec2.ISecurityGroup;
  readonly enableExecuteCommand?: boolean;
}

/** The capacity and the service, built in `scope` as `GpuCapacity` and `Inference`. */
export interface ServingParts {
  readonly capacity: GpuCapacity;
  readonly inference: InferenceService;
}

/**
 * Builds a group's capacity and service in `scope`. `cluster`: the cluster another group's capacity
 * made, to join it (@default - the capacity makes the cluster).
 */
export function addServing(
  scope: Construct,
  environment: ServingEnvironment,
  settings: ServingSettings,
  plan: ServingPlan,
  metricsServiceName: string,
  cluster?: ecs.Cluster,
): ServingParts {
  const { memory, manyModels } = plan;
  // One task per GPU; a rolling deploy (maxHealthyPercent 200) briefly needs twice the GPUs.
  const capacity = new GpuCapacity(scope, 'GpuCapacity', {
    vpc: environment.vpc,
    cluster,
    instanceType: settings.instanceType,
    minInstances: Math.ceil(settings.minCapacity / memory.gpuCount),
    maxInstances: Math.ceil((2 * settings.maxCapacity) / memory.gpuCount),
    amiVariant: environment.amiVariant,
    amiId: environment.amiId,
    notificationTopic: environment.notificationTopic,
    rootVolumeGiB: manyModels.rootVolumeGiB,
  });
  const inference = new InferenceService(scope, 'Inference', {
    cluster: capacity.cluster,
    capacityProvider: capacity.capacityProvider,
    modelStore: environment.modelStore,
    memory,
    image: environment.image,
    imageEnvironment: environment.imageEnvironment,
    metricsServiceName,
    minCapacity: settings.minCapacity,
    maxCapacity: settings.maxCapacity,
    targetPendingRequestsPerTask: settings.targetPendingRequestsPerTask,
    healthCheckGracePeriod: environment.healthCheckGracePeriod,
    metricsScraperCidr: environment.metricsScraperCidr,
    metricsScraperSecurityGroup: environment.metricsScraperSecurityGroup,
    enableExecuteCommand: environment.enableExecuteCommand,
    tracing: settings.tracing,
    serveFlags: [...manyModels.serveFlags, ...(settings.serveFlags ?? [])],
  });
  return { capacity, inference };
}

/** A group's target groups, one per listener. */
export interface ServiceTargetGroups {
  readonly http: elbv2.ApplicationTargetGroup;
  readonly grpc: elbv2.ApplicationTargetGroup;
}

/** What a group's alarms cover of the stack beyond its own service (Alarms' props of the same names). */
export type SharedAlarmTargets = Pick<AlarmsProps, 'oomKills' | 'loadBalancer'>;

/** Builds a group's alarms and dashboard in `scope`, as `Alarms` and `Dashboard`. */
export function addMonitoring(
  scope: Construct,
  parts: ServingParts,
  plan: ServingPlan,
  settings: ServingSettings,
  targets: ServiceTargetGroups,
  names: { readonly metricsServiceName: string; readonly dashboardName: string },
  shared: SharedAlarmTargets & { readonly topic: sns.ITopic; readonly latencyP99Threshold?: Duration },
): { alarms: Alarms; dashboard: Dashboard } {
  const alarms = new Alarms(scope, 'Alarms', {
    topic: shared.topic,
    cluster: parts.capacity.cluster,
    service: parts.inference.service,
    httpTargetGroup: targets.http,
    grpcTargetGroup: targets.grpc,
    loadBalancer: shared.loadBalancer,
    metricsServiceName: names.metricsServiceName,
    memoryHardLimitMiB: plan.memory.hardLimitMiB,
    gpuMemoryMiB: plan.memory.gpuMemoryMiB,
    oomKills: shared.oomKills,
    healthCheckGracePeriod: parts.inference.healthCheckGracePeriod,
    latencyP99Threshold: shared.latencyP99Threshold,
    evictionsPerTaskPerMinute: plan.manyModels.loadOnDemand
      ? (settings.evictionsPerTaskPerMinute ?? DEFAULT_EVICTIONS_PER_TASK_PER_MINUTE)
      : undefined,
  });
  const dashboard = new Dashboard(scope, 'Dashboard', {
    dashboardName: names.dashboardName,
    cluster: parts.capacity.cluster,
    service: parts.inference.service,
    httpTargetGroup: targets.http,
    grpcTargetGroup: targets.grpc,
    metricsServiceName: names.metricsServiceName,
    alarms,
    memoryHardLimitMiB: plan.memory.hardLimitMiB,
  });
  return { alarms, dashboard };
}
