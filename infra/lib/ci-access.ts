import { Aws, DefaultStackSynthesizer, Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import type { ModelStore } from './model-store.ts';

export const GITHUB_OIDC_URL = 'https://token.actions.githubusercontent.com';

export interface CiAccessProps {
  /** GitHub repository `owner/name` whose workflows may assume the role. */
  readonly githubRepo: string;
  /**
   * Branch whose workflow runs may assume the role (runs in a GitHub environment named
   * like the stack's envName may as well).
   * @default 'main'
   */
  readonly githubBranch?: string;
  /** GitHub environment name allowed besides the branch. */
  readonly githubEnvironment: string;
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
      assumedBy: new iam.WebIdentityPrincipal(providerArn, {
        StringEquals: { 'token.actions.githubusercontent.com:aud': 'sts.amazonaws.com' },
        StringLike: {
          'token.actions.githubusercontent.com:sub': [
            `repo:${props.githubRepo}:ref:refs/heads/${branch}`,
            `repo:${props.githubRepo}:environment:${props.githubEnvironment}`,
          ],
        },
      }),
    });

    const qualifier =
      (Stack.of(this).node.tryGetContext('@aws-cdk/core:bootstrapQualifier') as string | undefined) ??
      DefaultStackSynthesizer.DEFAULT_QUALIFIER;
    const bootstrapRoles = ['deploy', 'file-publishing', 'image-publishing', 'lookup'].map(
      (kind) => `arn:${Aws.PARTITION}:iam::${Aws.ACCOUNT_ID}:role/cdk-${qualifier}-${kind}-role-${Aws.ACCOUNT_ID}-${Aws.REGION}`,
    );
    this.role.addToPolicy(new iam.PolicyStatement({ actions: ['sts:AssumeRole', 'sts:TagSession'], resources: bootstrapRoles }));
    props.modelStore.grantPublishRepository(this.role);
    props.repositoryKey.grantRead(this.role);
  }
}
