import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { acknowledgeWildcardResource } from './nag.ts';
import { MODEL_REPOSITORY_KEY_HEADER } from './server-metrics.ts';

export interface ModelStoreProps {
  /**
   * Existing bucket that holds the model repository.
   * @default - a new bucket is created
   */
  readonly bucketName?: string;
  /**
   * Key prefix of the model repository inside the bucket, without leading or trailing slash.
   * @default 'models'
   */
  readonly prefix?: string;
  /**
   * Where the new bucket writes its server access logs (unused when bucketName is given).
   * @default - no server access logs
   */
  readonly accessLogsBucket?: s3.IBucket;
  /**
   * How long an overwritten or deleted object version of the new bucket is kept (versioning's
   * undo window); the newest `noncurrentVersionsToRetain` are kept whatever their age. Unused
   * for an imported bucket, whose lifecycle is its owner's.
   * @default Duration.days(30)
   */
  readonly noncurrentVersionExpiration?: Duration;
  /** @default 3 */
  readonly noncurrentVersionsToRetain?: number;
}

const PREFIX_PATTERN = /^[A-Za-z0-9!_.*'()-]+(\/[A-Za-z0-9!_.*'()-]+)*$/;

/**
 * The S3 model repository (bucket + prefix) and the generated API key that guards the
 * server's model-repository endpoints (load/unload through HTTP).
 */
export class ModelStore extends Construct {
  readonly bucket: s3.IBucket;
  readonly prefix: string;
  /** `s3://bucket/prefix`, as given to `--model-repository`. */
  readonly repositoryUri: string;
  readonly repositoryKey: secretsmanager.Secret;

  constructor(scope: Construct, id: string, props: ModelStoreProps = {}) {
    super(scope, id);
    const prefix = props.prefix ?? 'models';
    if (!PREFIX_PATTERN.test(prefix)) {
      throw new Error(
        `modelPrefix '${prefix}' is not a valid key prefix: use segments like 'models' or 'prod/models', ` +
          'without leading or trailing slash.',
      );
    }
    this.prefix = prefix;

    if (props.bucketName !== undefined) {
      this.bucket = s3.Bucket.fromBucketName(this, 'Bucket', props.bucketName);
    } else {
      const bucket = new s3.Bucket(this, 'Bucket', {
        encryption: s3.BucketEncryption.S3_MANAGED,
        blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
        enforceSSL: true,
        versioned: true,
        serverAccessLogsBucket: props.accessLogsBucket,
        serverAccessLogsPrefix: props.accessLogsBucket ? 'model-bucket/' : undefined,
        removalPolicy: RemovalPolicy.RETAIN,
        // Versioning keeps every overwritten model file (hundreds of MiB each) forever otherwise.
        lifecycleRules: [
          {
            id: 'NoncurrentVersions',
            noncurrentVersionExpiration: props.noncurrentVersionExpiration ?? Duration.days(30),
            noncurrentVersionsToRetain: props.noncurrentVersionsToRetain ?? 3,
            expiredObjectDeleteMarker: true,
            abortIncompleteMultipartUploadAfter: Duration.days(7),
          },
        ],
      });
      if (!props.accessLogsBucket) {
        Validations.of(bucket).acknowledge({
          id: 'AwsSolutions-S1',
          reason: 'No access logs bucket was given to ModelStore; reads are audited by CloudTrail data events if enabled.',
        });
      }
      this.bucket = bucket;
    }
    this.repositoryUri = `s3://${this.bucket.bucketName}/${prefix}`;

    this.repositoryKey = new secretsmanager.Secret(this, 'RepositoryKey', {
      description: `API key for the Batchwise model-repository endpoints (header ${MODEL_REPOSITORY_KEY_HEADER}).`,
      generateSecretString: { passwordLength: 40, excludePunctuation: true },
    });
    Validations.of(this.repositoryKey).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'Static API key read by running tasks at start and by the promotion workflow; rotating it needs a ' +
        'task redeploy, so it is rotated by redeploying with a new secret, not by a rotation Lambda.',
    });
  }

  /** `arn:...:bucket/prefix/*`: every object of the repository. */
  get objectsArn(): string {
    return this.bucket.arnForObjects(`${this.prefix}/*`);
  }

  /** Read-only access to the repository prefix: list it, read its objects. */
  grantReadRepository(grantee: iam.IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['s3:ListBucket'],
        resources: [this.bucket.bucketArn],
        conditions: { StringLike: { 's3:prefix': [this.prefix, `${this.prefix}/*`] } },
      }),
    );
    grantee.grantPrincipal.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [this.objectsArn] }));
    this.acknowledgePrefixWildcard(grantee);
  }

  private acknowledgePrefixWildcard(grantee: iam.IGrantable): void {
    if (!Construct.isConstruct(grantee.grantPrincipal)) return;
    acknowledgeWildcardResource(
      grantee.grantPrincipal,
      this.objectsArn,
      `Scoped to the model repository: every object under s3://<bucket>/${this.prefix}/ is part of it.`,
    );
  }

  /** Canary releases (`models canary`): removing a model's canary.json when the release finishes, and no other object. */
  grantCanaryRelease(grantee: iam.IGrantable): void {
    const declarations = this.bucket.arnForObjects(`${this.prefix}/*/canary.json`);
    grantee.grantPrincipal.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['s3:DeleteObject'], resources: [declarations] }));
    if (Construct.isConstruct(grantee.grantPrincipal)) {
      acknowledgeWildcardResource(
        grantee.grantPrincipal,
        declarations,
        'Only the canary.json declaration of each model folder of the repository.',
      );
    }
  }

  /** Publishing to the repository prefix: list, read and write its objects, nothing else. */
  grantPublishRepository(grantee: iam.IGrantable): void {
    this.grantReadRepository(grantee);
    grantee.grantPrincipal.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['s3:PutObject', 's3:AbortMultipartUpload'],
        resources: [this.objectsArn],
      }),
    );
  }
}
