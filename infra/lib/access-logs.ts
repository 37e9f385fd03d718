import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';

export interface AccessLogsProps {
  /**
   * Days to keep access logs (ALB, S3 server access, VPC flow logs).
   * @default 90
   */
  readonly retentionDays?: number;
}

/** One bucket for the stack's access logs: ALB, model bucket server access, VPC flow logs. */
export class AccessLogs extends Construct {
  readonly bucket: s3.Bucket;

  constructor(scope: Construct, id: string, props: AccessLogsProps = {}) {
    super(scope, id);
    const retentionDays = props.retentionDays ?? 90;
    if (!Number.isInteger(retentionDays) || retentionDays < 1) {
      throw new Error(`AccessLogs retentionDays must be a positive integer, got ${retentionDays}.`);
    }
    this.bucket = new s3.Bucket(this, 'Bucket', {
      // ALB access logs support SSE-S3 only, not KMS.
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
      lifecycleRules: [{ expiration: Duration.days(retentionDays) }],
      removalPolicy: RemovalPolicy.RETAIN,
    });
    Validations.of(this.bucket).acknowledge({
      id: 'AwsSolutions-S1',
      reason: 'This bucket is the server access log destination; logging it into itself would loop.',
    });
  }
}
