import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';

export interface NetworkProps {
  /**
   * NAT gateways for the private subnets' egress (ECR, CloudWatch, Secrets Manager, ECS).
   * One per AZ survives an AZ outage; one costs half.
   * @default 1
   */
  readonly natGateways?: number;
  /** Bucket that receives VPC flow logs (under `vpc-flow-logs/`). */
  readonly flowLogBucket: s3.IBucket;
}

/** VPC over two AZs: ALB in public subnets, instances and tasks in private ones. */
export class Network extends Construct {
  readonly vpc: ec2.Vpc;

  constructor(scope: Construct, id: string, props: NetworkProps) {
    super(scope, id);
    const natGateways = props.natGateways ?? 1;
    if (!Number.isInteger(natGateways) || natGateways < 1 || natGateways > 2) {
      throw new Error(`natGateways must be 1 or 2 (private subnets need egress), got ${natGateways}.`);
    }
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways,
      subnetConfiguration: [
        { name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 },
        { name: 'private', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 20 },
      ],
      // Model downloads go through the endpoint instead of the NAT gateway (no per-GB charge).
      // Nothing uses the default security group; restricting it would add a custom-resource Lambda.
      restrictDefaultSecurityGroup: false,
      gatewayEndpoints: { S3: { service: ec2.GatewayVpcEndpointAwsService.S3 } },
    });
    this.vpc.addFlowLog('FlowLog', {
      destination: ec2.FlowLogDestination.toS3(props.flowLogBucket, 'vpc-flow-logs/'),
      trafficType: ec2.FlowLogTrafficType.ALL,
    });
  }
}
