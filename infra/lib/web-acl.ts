import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import { Construct } from 'constructs';

export interface WebAclProps {
  /** The load balancer the web ACL protects. */
  readonly loadBalancer: elbv2.IApplicationLoadBalancer;
  /**
   * Requests one client IP may send in any 5 minutes before it is blocked (AWS WAF counts over a
   * sliding 5-minute window, evaluated about every 30 seconds).
   * @default 20000
   */
  readonly rateLimitPer5Minutes?: number;
}

/** Name of the rate-based rule, and of its CloudWatch metric (namespace AWS/WAFV2). */
export const RATE_LIMIT_RULE = 'RateLimitPerClientIp';

/**
 * An AWS WAF v2 web ACL on the load balancer with a rate-based rule per client IP: one address
 * cannot drive the autoscaling to the maximum number of GPU instances. Only a rate rule: managed
 * rule groups that inspect bodies (the common rule set's 8 KB body limit) would block ordinary
 * inference requests, whose tensors are larger.
 */
export class WebAcl extends Construct {
  readonly webAcl: wafv2.CfnWebACL;

  constructor(scope: Construct, id: string, props: WebAclProps) {
    super(scope, id);
    const limit = props.rateLimitPer5Minutes ?? 20_000;
    if (!Number.isInteger(limit) || limit < 10 || limit > 2_000_000_000) {
      throw new Error(`rateLimitPer5Minutes must be an integer within 10..2000000000 (AWS WAF's range), got ${limit}.`);
    }
    const visibility = (metricName: string): wafv2.CfnWebACL.VisibilityConfigProperty => ({
      cloudWatchMetricsEnabled: true,
      metricName,
      sampledRequestsEnabled: true,
    });
    this.webAcl = new wafv2.CfnWebACL(this, 'WebAcl', {
      scope: 'REGIONAL',
      description: 'Batchwise load balancer: per-client-IP rate limit',
      defaultAction: { allow: {} },
      visibilityConfig: visibility('BatchwiseWebAcl'),
      rules: [
        {
          name: RATE_LIMIT_RULE,
          priority: 0,
          action: { block: {} },
          statement: { rateBasedStatement: { limit, aggregateKeyType: 'IP', evaluationWindowSec: 300 } },
          visibilityConfig: visibility(RATE_LIMIT_RULE),
        },
      ],
    });
    new wafv2.CfnWebACLAssociation(this, 'Association', {
      resourceArn: props.loadBalancer.loadBalancerArn,
      webAclArn: this.webAcl.attrArn,
    });
  }
}
