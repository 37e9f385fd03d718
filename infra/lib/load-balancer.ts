import { Aws, CfnRule, Duration, Fn, Stack, Token, Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { CONTAINER_NAME, SERVER_PORTS } from './inference-service.ts';
import { MODEL_REPOSITORY_KEY_HEADER, SEQUENCE_COOKIE } from './server-metrics.ts';
import { WebAcl } from './web-acl.ts';

/** A service's target groups, one per listener: its container `server` receives HTTP on 8000 and gRPC on 8001. */
export interface ServiceTargetGroupsProps {
  readonly vpc: ec2.IVpc;
  readonly service: ecs.Ec2Service;
  /**
   * Time a deregistering task keeps receiving in-flight requests; below the container stopTimeout.
   * @default Duration.seconds(60)
   */
  readonly deregistrationDelay?: Duration;
  /**
   * How long the ALB keeps sending a client's HTTP requests to the task that answered a request of its
   * sequence (application-cookie stickiness on the server's `batchwise-sequence` cookie), counted from
   * the last such reply. Between 1 second and 7 days, the ALB's range.
   * @default Duration.hours(1)
   */
  readonly sequenceStickiness?: Duration;
}

export interface LoadBalancerProps extends Omit<ServiceTargetGroupsProps, 'service'> {
  /**
   * The ECS service the listeners send everything to: the load balancer makes its target groups.
   * Give this or `targetGroups`.
   */
  readonly service?: ecs.Ec2Service;
  /** Target groups made elsewhere (serviceTargetGroups) that the listeners send what no rule matches to. */
  readonly targetGroups?: { readonly http: elbv2.ApplicationTargetGroup; readonly grpc: elbv2.ApplicationTargetGroup };
  /** ACM certificate for the HTTPS listeners (gRPC on an ALB needs HTTPS). */
  readonly certificateArn: string;
  /**
   * Protocol of the :8000 listener (KServe v2 REST). HTTPS uses the same certificate. HTTP is an
   * explicit choice: the load balancer then refuses the model-repository API and any request
   * carrying the repository key header on :8000 (403), so the key never travels in clear text.
   * @default elbv2.ApplicationProtocol.HTTPS
   */
  readonly httpListenerProtocol?: elbv2.ApplicationProtocol;
  /**
   * Clients allowed to reach :8000 and :8001; '0.0.0.0/0' makes the endpoint public. No
   * default: a public endpoint is a decision, not an accident.
   */
  readonly allowedIngressCidr: string;
  /**
   * Requests one client IP may send in any 5 minutes before AWS WAF blocks it (rate-based rule).
   * @default 20000 (about 67 requests per second, sustained)
   */
  readonly wafRateLimitPer5Minutes?: number;
  /** Bucket that receives ALB access logs (under `alb/`). */
  readonly accessLogsBucket: s3.IBucket;
}

const ACM_ARN_PATTERN = /^arn:aws[a-z-]*:acm:([a-z0-9-]+):\d{12}:certificate\/[A-Za-z0-9-]+$/;

/** Paths of the model-repository API (load, unload, index), refused on a plain HTTP listener. */
export const MODEL_REPOSITORY_PATHS = ['/v2/repository/*'];

/**
 * An ALB only uses ACM certificates of its own region; a certificate from another region fails
 * the listener after minutes of deploy. Checked at synth when the stack's region is known, and
 * always by a CloudFormation rule, which fails the deploy before any resource is created
 * (an environment-agnostic synth has no region to compare with).
 */
function checkCertificateRegion(scope: Construct, certificateArn: string): void {
  const certificateRegion = ACM_ARN_PATTERN.exec(certificateArn)?.[1];
  if (certificateRegion === undefined) return;
  const stackRegion = Stack.of(scope).region;
  if (!Token.isUnresolved(stackRegion) && stackRegion !== certificateRegion) {
    throw new Error(
      `certificateArn is in ${certificateRegion} but the stack deploys to ${stackRegion}: an ALB needs an ACM ` +
        `certificate of its own region. Request or import the certificate in ${stackRegion}.`,
    );
  }
  new CfnRule(scope, 'CertificateRegion', {
    assertions: [
      {
        assert: Fn.conditionEquals(Aws.REGION, certificateRegion),
        assertDescription:
          `certificateArn is an ACM certificate of ${certificateRegion}: deploy the stack to ${certificateRegion}, or use ` +
          'a certificate of the region you deploy to (an ALB only uses certificates of its own region).',
      },
    ],
  });
}

/**
 * A service's two target groups, made in `scope` as `HttpTargetGroup` and `GrpcTargetGroup`: IP
 * targets (awsvpc), least outstanding requests, readiness health checks, and on HTTP the sequence
 * cookie's stickiness.
 */
export function serviceTargetGroups(
  scope: Construct,
  props: ServiceTargetGroupsProps,
): { http: elbv2.ApplicationTargetGroup; grpc: elbv2.ApplicationTargetGroup } {
  const deregistrationDelay = props.deregistrationDelay ?? Duration.seconds(60);
  const sequenceStickiness = props.sequenceStickiness ?? Duration.hours(1);
  const stickinessSeconds = sequenceStickiness.toSeconds();
  if (stickinessSeconds < 1 || stickinessSeconds > Duration.days(7).toSeconds()) {
    throw new Error(
      `sequenceStickiness is ${sequenceStickiness.toHumanString()}: an ALB keeps a cookie's stickiness between 1 second and 7 days`,
    );
  }
  const common = {
    vpc: props.vpc,
    targetType: elbv2.TargetType.IP,
    protocol: elbv2.ApplicationProtocol.HTTP,
    deregistrationDelay,
    // Batches make request cost uneven; send new work to the least busy task.
    loadBalancingAlgorithmType: elbv2.TargetGroupLoadBalancingAlgorithmType.LEAST_OUTSTANDING_REQUESTS,
  };
  const healthCheckTiming = {
    interval: Duration.seconds(15),
    timeout: Duration.seconds(5),
    healthyThresholdCount: 2,
    unhealthyThresholdCount: 3,
  };
  const http = new elbv2.ApplicationTargetGroup(scope, 'HttpTargetGroup', {
    ...common,
    port: SERVER_PORTS.http,
    // A stateful model's sequence lives on one task: the server sets its cookie on a sequence's replies, the ALB then keeps
    // the client's requests on that task (clients must send back the ALB's AWSALBAPP-* cookies). Other requests are not
    // sticky. gRPC needs none: a ModelStreamInfer stream stays on one task.
    stickinessCookieName: SEQUENCE_COOKIE,
    stickinessCookieDuration: sequenceStickiness,
    healthCheck: { ...healthCheckTiming, path: '/v2/health/ready', healthyHttpCodes: '200' },
  });
  const grpc = new elbv2.ApplicationTargetGroup(scope, 'GrpcTargetGroup', {
    ...common,
    port: SERVER_PORTS.grpc,
    protocolVersion: elbv2.ApplicationProtocolVersion.GRPC,
    // The ALB default is /AWS.ALB/healthcheck expecting 12 (UNIMPLEMENTED).
    healthCheck: { ...healthCheckTiming, path: '/grpc.health.v1.Health/Check', healthyGrpcCodes: '0' },
  });
  http.addTarget(props.service.loadBalancerTarget({ containerName: CONTAINER_NAME, containerPort: SERVER_PORTS.http }));
  grpc.addTarget(props.service.loadBalancerTarget({ containerName: CONTAINER_NAME, containerPort: SERVER_PORTS.grpc }));
  return { http, grpc };
}

/**
 * Internet-facing ALB: :8000 (HTTP or HTTPS) to the REST port, :8001 HTTPS to the gRPC port
 * with a GRPC target group. The metrics port 8002 is never exposed.
 */
export class LoadBalancer extends Construct {
  readonly loadBalancer: elbv2.ApplicationLoadBalancer;
  readonly httpTargetGroup: elbv2.ApplicationTargetGroup;
  readonly grpcTargetGroup: elbv2.ApplicationTargetGroup;
  readonly httpListener: elbv2.ApplicationListener;
  readonly grpcListener: elbv2.ApplicationListener;

  constructor(scope: Construct, id: string, props: LoadBalancerProps) {
    super(scope, id);
    // Tokens (e.g. a CfnParameter) cannot be checked at synth time.
    if (!props.certificateArn.startsWith('${Token') && !ACM_ARN_PATTERN.test(props.certificateArn)) {
      throw new Error(
        `certificateArn '${props.certificateArn}' is not an ACM certificate ARN ` + '(arn:aws:acm:<region>:<account>:certificate/<id>).',
      );
    }
    checkCertificateRegion(this, props.certificateArn);
    const httpProtocol = props.httpListenerProtocol ?? elbv2.ApplicationProtocol.HTTPS;
    const ingressCidr = props.allowedIngressCidr;
    const certificates = [elbv2.ListenerCertificate.fromArn(props.certificateArn)];
    if ((props.service === undefined) === (props.targetGroups === undefined)) {
      throw new Error('LoadBalancer: give either the service or the target groups its listeners send to.');
    }

    const securityGroup = new ec2.SecurityGroup(this, 'SecurityGroup', {
      vpc: props.vpc,
      description: `Batchwise ALB: ${SERVER_PORTS.http} (REST) and ${SERVER_PORTS.grpc} (gRPC) from clients`,
      allowAllOutbound: false,
    });
    for (const port of [SERVER_PORTS.http, SERVER_PORTS.grpc]) {
      securityGroup.addIngressRule(ec2.Peer.ipv4(ingressCidr), ec2.Port.tcp(port), 'inference clients');
    }
    if (ingressCidr === '0.0.0.0/0') {
      Validations.of(securityGroup).acknowledge({
        id: 'AwsSolutions-EC23',
        reason:
          'allowedIngressCidr 0.0.0.0/0 was set explicitly (the context has no default): a public inference ' +
          'endpoint on 8000/8001 only, behind a WAF rate-based rule per client IP; the model-repository API ' +
          `behind it requires the ${MODEL_REPOSITORY_KEY_HEADER} header, over HTTPS only.`,
      });
    }

    this.loadBalancer = new elbv2.ApplicationLoadBalancer(this, 'LoadBalancer', {
      vpc: props.vpc,
      internetFacing: true,
      vpcSubnets: { subnetType: ec2.SubnetType.PUBLIC },
      securityGroup,
      dropInvalidHeaderFields: true,
      http2Enabled: true,
    });
    new WebAcl(this, 'WebAcl', { loadBalancer: this.loadBalancer, rateLimitPer5Minutes: props.wafRateLimitPer5Minutes });
    if (Token.isUnresolved(Stack.of(this).region)) {
      Validations.of(this.loadBalancer).acknowledge({
        id: 'AwsSolutions-ELB2',
        reason:
          "Region-agnostic synth: the access-log bucket policy must name the region's ELB log-delivery " +
          'principal, which is unknown here. Deploys (cdk deploy sets CDK_DEFAULT_REGION) enable access logs.',
      });
    } else {
      this.loadBalancer.logAccessLogs(props.accessLogsBucket, 'alb');
    }

    const targets = props.targetGroups ?? serviceTargetGroups(this, { ...props, service: props.service! });
    this.httpTargetGroup = targets.http;
    this.grpcTargetGroup = targets.grpc;

    this.httpListener = this.loadBalancer.addListener('Http', {
      port: SERVER_PORTS.http,
      protocol: httpProtocol,
      certificates: httpProtocol === elbv2.ApplicationProtocol.HTTPS ? certificates : undefined,
      sslPolicy: httpProtocol === elbv2.ApplicationProtocol.HTTPS ? elbv2.SslPolicy.RECOMMENDED_TLS : undefined,
      open: false,
      defaultTargetGroups: [this.httpTargetGroup],
    });
    this.grpcListener = this.loadBalancer.addListener('Grpc', {
      port: SERVER_PORTS.grpc,
      protocol: elbv2.ApplicationProtocol.HTTPS,
      certificates,
      sslPolicy: elbv2.SslPolicy.RECOMMENDED_TLS,
      open: false,
      defaultTargetGroups: [this.grpcTargetGroup],
    });
    if (httpProtocol === elbv2.ApplicationProtocol.HTTP) this.refuseRepositoryKeyInClearText(this.httpListener);
  }

  /** On a plain HTTP listener: the model-repository API, and anything carrying its key, get 403 from the ALB. */
  private refuseRepositoryKeyInClearText(listener: elbv2.ApplicationListener): void {
    const refusal = elbv2.ListenerAction.fixedResponse(403, {
      contentType: 'application/json',
      messageBody: JSON.stringify({
        error: `the model-repository API and the ${MODEL_REPOSITORY_KEY_HEADER} header are refused on plain HTTP: use the HTTPS listeners`,
      }),
    });
    listener.addAction('RefuseRepositoryKeyHeader', {
      priority: 1,
      conditions: [elbv2.ListenerCondition.httpHeader(MODEL_REPOSITORY_KEY_HEADER, ['*'])],
      action: refusal,
    });
    listener.addAction('RefuseRepositoryApi', {
      priority: 2,
      conditions: [elbv2.ListenerCondition.pathPatterns(MODEL_REPOSITORY_PATHS)],
      action: refusal,
    });
  }
}
