import type * as ecs from 'aws-cdk-lib/aws-ecs';
import { Construct } from 'constructs';
import type { Alarms } from './alarms.ts';
import type { Dashboard } from './dashboard.ts';
import { serviceTargetGroups } from './load-balancer.ts';
import type { ModelGroup } from './model-groups.ts';
import { addMonitoring, addServing } from './serving-group.ts';
import type {
  ServiceTargetGroups,
  ServingEnvironment,
  ServingParts,
  ServingPlan,
  ServingSettings,
  SharedAlarmTargets,
} from './serving-group.ts';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type { Duration } from 'aws-cdk-lib';

export interface ModelGroupServiceProps {
  readonly group: ModelGroup;
  readonly environment: ServingEnvironment;
  /** The group's settings, the stack's filled in where the group has none. */
  readonly settings: ServingSettings;
  readonly plan: ServingPlan;
  /** EMF `ServiceName` of its tasks: its autoscaling signal and its alarms' server metrics are its own. */
  readonly metricsServiceName: string;
  readonly dashboardName: string;
  /** The cluster of the groups made before it. @default - its capacity makes the cluster */
  readonly cluster?: ecs.Cluster;
}

/**
 * One model group (model-groups.ts) as its own ECS service: GPU capacity, the service (its tasks
 * serving only the group's models, `--model-filter`), autoscaling on its own pending requests, target
 * groups on both listeners, and, once the load balancer exists, its alarms and dashboard. The same
 * constructs the stack without groups builds at its top level (serving-group.ts).
 */
export class ModelGroupService extends Construct {
  readonly parts: ServingParts;
  readonly targetGroups: ServiceTargetGroups;

  constructor(
    scope: Construct,
    id: string,
    private readonly props: ModelGroupServiceProps,
  ) {
    super(scope, id);
    this.parts = addServing(this, props.environment, props.settings, props.plan, props.metricsServiceName, props.cluster);
    this.targetGroups = serviceTargetGroups(this, { vpc: props.environment.vpc, service: this.parts.inference.service });
  }

  /** Its alarms and dashboard; `shared` says which of the stack-wide alarms it makes (the default group's) or reads. */
  addMonitoring(shared: SharedAlarmTargets & { readonly topic: sns.ITopic; readonly latencyP99Threshold?: Duration }): {
    alarms: Alarms;
    dashboard: Dashboard;
  } {
    return addMonitoring(
      this,
      this.parts,
      this.props.plan,
      this.props.settings,
      this.targetGroups,
      { metricsServiceName: this.props.metricsServiceName, dashboardName: this.props.dashboardName },
      shared,
    );
  }
}
