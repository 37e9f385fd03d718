import { Aws, DefaultStackSynthesizer, Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { acknowledgeWildcardResource } from './nag.ts';
import type { ModelStore } from './model-store.ts';

export const GITHUB_OIDC_URL = 'https://token.actions.githubusercontent.com';

export interface CiAccessProps {
  /** GitHub repository `owner/name` whose workflows may assume the role. */
  readonly githubRepo: string;
  /**
   * The protected branch deploys come from. Checked by the role itself only with `refInSubject`;
   * otherwise the GitHub environment's deployment branch rule must allow only this branch (and
   * the `model/*` tags of promotions): infra/README, "CI access".
   * @default 'main'
   */
  readonly githubBranch?: string;
  /** The GitHub environment the deploy and promotion jobs run in (named like the stack's envName). */
  readonly githubEnvironment: string;
  /**
   * The repository's OIDC subject is customised to include the ref (`include_claim_keys`
   * `["repo", "context", "ref"]`): trust only jobs of the environment on the branch or on a
   * `model/*` tag. Without it GitHub's default subject names the environment but not the branch,
   * and only the environment's protection rules keep other branches out.
   * @default false
   */
  readonly refInSubject?: boolean;
  /**
   * ARN of the account's existing GitHub OIDC provider (an account holds one per URL).
   * @default - a provider is created
   */
  readonly githubOidcProviderArn?: string;
  readonly modelStore: ModelStore;
  /** Secret the promotion workflow sends with model-repository requests. */
  readonly repositoryKey: secretsmanager.ISecret;
}

const REPO_PATTERN = /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/;

/** Tags whose pushes promote a model (.github/workflows/promote-model.yml). */
export const PROMOTION_TAG_PATTERN = 'model/*';

/**
 * Who may assume the CI role: jobs of `repo` that run in the GitHub `environment`, nothing else
 * (no branch-only subject: a job without the environment skips its protection rules). With
 * `refInSubject` the subject also names the ref, so the role itself admits only the branch and
 * the promotion tags; with GitHub's default subject the environment's deployment branch rule
 * does that (infra/README, "CI access").
 */
function trustConditions(repo: string, environment: string, branch: string, refInSubject: boolean): iam.Conditions {
  const aud = { 'token.actions.githubusercontent.com:aud': 'sts.amazonaws.com' };
  const subject = `repo:${repo}:environment:${environment}`;
  if (!refInSubject) return { StringEquals: { ...aud, 'token.actions.githubusercontent.com:sub': subject } };
  return {
    StringEquals: aud,
    StringLike: {
      'token.actions.githubusercontent.com:sub': [
        `${subject}:ref:refs/heads/${branch}`,
        `${subject}:ref:refs/tags/${PROMOTION_TAG_PATTERN}`,
      ],
    },
  };
}

/**
 * Role for GitHub Actions through OIDC: may assume the CDK bootstrap roles (deploy),
 * publish to the model repository prefix, and read the repository API key.
 */
export class CiAccess extends Construct {
  readonly role: iam.Role;

  constructor(scope: Construct, id: string, props: CiAccessProps) {
    super(scope, id);
    if (!REPO_PATTERN.test(props.githubRepo)) {
      throw new Error(`githubRepo must be 'owner/name', got '${props.githubRepo}'.`);
    }
    const branch = props.githubBranch ?? 'main';
    // The trust policy compares with StringLike: a wildcard here would widen it.
    if (!/^[A-Za-z0-9._/-]+$/.test(branch)) throw new Error(`githubBranch must be a branch name without wildcards, got '${branch}'.`);
    const providerArn =
      props.githubOidcProviderArn ??
      new iam.OidcProviderNative(this, 'GithubOidcProvider', {
        url: GITHUB_OIDC_URL,
        clientIds: ['sts.amazonaws.com'],
      }).oidcProviderArn;

    this.role = new iam.Role(this, 'Role', {
      description: `GitHub Actions of ${props.githubRepo}: cdk deploy and model promotion`,
      // The deploy job may run 90 minutes (an ECS deployment waits for new GPU instances and
      // model downloads); its credentials must outlive it (.github/workflows/deploy.yml asks for
      // role-duration-seconds 5400). The CDK CLI re-assumes the chained bootstrap roles (1 h
      // limit) from these credentials as long as they are valid.
      maxSessionDuration: Duration.hours(2),
      assumedBy: new iam.WebIdentityPrincipal(
        providerArn,
        trustConditions(props.githubRepo, props.githubEnvironment, branch, props.refInSubject ?? false),
      ),
    });

    const qualifier =
      (Stack.of(this).node.tryGetContext('@aws-cdk/core:bootstrapQualifier') as string | undefined) ??
      DefaultStackSynthesizer.DEFAULT_QUALIFIER;
    const bootstrapRoles = ['deploy', 'file-publishing', 'image-publishing', 'lookup'].map(
      (kind) => `arn:${Aws.PARTITION}:iam::${Aws.ACCOUNT_ID}:role/cdk-${qualifier}-${kind}-role-${Aws.ACCOUNT_ID}-${Aws.REGION}`,
    );
    this.role.addToPolicy(new iam.PolicyStatement({ actions: ['sts:AssumeRole', 'sts:TagSession'], resources: bootstrapRoles }));
    props.modelStore.grantPublishRepository(this.role);
    props.modelStore.grantCanaryRelease(this.role);
    // `models canary --region` watches the tasks' CanaryRollbacks; GetMetricData has no resource-level permissions.
    this.role.addToPolicy(new iam.PolicyStatement({ actions: ['cloudwatch:GetMetricData'], resources: ['*'] }));
    acknowledgeWildcardResource(
      this.role,
      '*',
      'cloudwatch:GetMetricData supports no resource-level permissions (canary releases read metrics).',
    );
    props.repositoryKey.grantRead(this.role);
  }
}
