import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import { Construct } from 'constructs';
import { MODEL_ROUTING_HEADER } from './model-groups.ts';
import type { RoutePlan, RouteRule } from './model-groups.ts';
import type { ServiceTargetGroups } from './serving-group.ts';

export interface ModelRoutingProps {
  readonly httpListener: elbv2.ApplicationListener;
  readonly grpcListener: elbv2.ApplicationListener;
  /** The rules (planRoutes, which checked them against the ALB's limits). */
  readonly plan: RoutePlan;
  /** Each group's target groups, by name. */
  readonly targetGroups: ReadonlyMap<string, ServiceTargetGroups>;
}

/**
 * The listener rules that send each model group's requests to its target groups: on :8000 by the
 * request's path (`/v2/models/<model>` and below), on :8001 by the `batchwise-model` header gRPC
 * clients set (the model's name travels inside the protobuf message, where an ALB cannot look).
 */
export class ModelRouting extends Construct {
  readonly rules: elbv2.ApplicationListenerRule[] = [];

  constructor(scope: Construct, id: string, props: ModelRoutingProps) {
    super(scope, id);
    const add = (rule: RouteRule, kind: 'Http' | 'Grpc') => {
      const targets = props.targetGroups.get(rule.group);
      if (!targets) throw new Error(`ModelRouting: no target groups for group '${rule.group}'.`);
      this.rules.push(
        new elbv2.ApplicationListenerRule(this, `${kind}${rule.priority}`, {
          listener: kind === 'Http' ? props.httpListener : props.grpcListener,
          priority: rule.priority,
          conditions: [
            kind === 'Http'
              ? elbv2.ListenerCondition.pathPatterns([...rule.values])
              : elbv2.ListenerCondition.httpHeader(MODEL_ROUTING_HEADER, [...rule.values]),
          ],
          targetGroups: [kind === 'Http' ? targets.http : targets.grpc],
        }),
      );
    };
    for (const rule of props.plan.http) add(rule, 'Http');
    for (const rule of props.plan.grpc) add(rule, 'Grpc');
  }
}
