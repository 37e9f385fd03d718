import { Duration, Stack, Token, Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { CONTAINER_NAME, SERVER_PORTS } from './inference-service.ts';

export interface LoadBalancerProps {
  readonly vpc: ec2.IVpc;
  /** The ECS service whose container `server` receives HTTP on 8000 and gRPC on 8001. */
  readonly service: ecs.Ec2Service;
  /** ACM certificate for the HTTPS listeners (gRPC on an ALB needs HTTPS). */
  readonly certificateArn: string;
  /**
   * Protocol of the :8000 listener (KServe v2 REST). HTTPS uses the same certificate.
   * @default elbv2.ApplicationProtocol.HTTP
   */
  readonly httpListenerProtocol?: elbv2.ApplicationProtocol;
  /**
   * Clients allowed to reach :8000 and :8001.
   * @default '0.0.0.0/0'
   */
  readonly allowedIngressCidr?: string;
  /** Bucket that receives ALB access logs (under `alb/`). */
  readonly accessLogsBucket: s3.IBucket;
  /**
   * Time a deregistering task keeps receiving in-flight requests; below the container stopTimeout.
   * @default Duration.seconds(60)
   */
  readonly deregistrationDelay?: Duration;
}

const ACM_ARN_PATTERN = /^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate\/[A-Za-z0-9-]+$/;

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
        `certificateArn '${props.certificateArn}' is not an ACM certificate ARN ` +
          '(arn:aws:acm:<region>:<account>:certificate/<id>).',
      );
    }
    const httpProtocol = props.httpListenerProtocol ?? elbv2.ApplicationProtocol.HTTP;
    const ingressCidr = props.allowedIngressCidr ?? '0.0.0.0/0';
    const deregistrationDelay = props.deregistrationDelay ?? Duration.seconds(60);
    const certificates = [elbv2.ListenerCertificate.fromArn(props.certificateArn)];

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
          'Public inference endpoint on 8000/8001 only; narrow it with context allowedIngressCidr. The ' +
          'model-repository API behind it requires the batchwise-key header.',
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
    if (Token.isUnresolved(Stack.of(this).region)) {
      Validations.of(this.loadBalancer).acknowledge({
        id: 'AwsSolutions-ELB2',
        reason:
          'Region-agnostic synth: the access-log bucket policy must name the region\'s ELB log-delivery ' +
          'principal, which is unknown here. Deploys (cdk deploy sets CDK_DEFAULT_REGION) enable access logs.',
      });
    } else {
      this.loadBalancer.logAccessLogs(props.accessLogsBucket, 'alb');
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

    this.httpTargetGroup = new elbv2.ApplicationTargetGroup(this, 'HttpTargetGroup', {
      ...common,
      port: SERVER_PORTS.http,
      healthCheck: { ...healthCheckTiming, path: '/v2/health/ready', healthyHttpCodes: '200' },
    });
    this.grpcTargetGroup = new elbv2.ApplicationTargetGroup(this, 'GrpcTargetGroup', {
      ...common,
      port: SERVER_PORTS.grpc,
      protocolVersion: elbv2.ApplicationProtocolVersion.GRPC,
      // The ALB default is /AWS.ALB/healthcheck expecting 12 (UNIMPLEMENTED).
      healthCheck: { ...healthCheckTiming, path: '/grpc.health.v1.Health/Check', healthyGrpcCodes: '0' },
    });
    this.httpTargetGroup.addTarget(
      props.service.loadBalancerTarget({ containerName: CONTAINER_NAME, containerPort: SERVER_PORTS.http }),
    );
    this.grpcTargetGroup.addTarget(
      props.service.loadBalancerTarget({ containerName: CONTAINER_NAME, containerPort: SERVER_PORTS.grpc }),
    );

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
  }
}
