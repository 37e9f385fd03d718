import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { IMAGE_URI, REQUIRED, memo, synth } from './synth.ts';

/** infra/bootstrap/cloudformation-execution-policy.json: what `cdk bootstrap --cloudformation-execution-policies` gets. */
const policy = JSON.parse(readFileSync(new URL('../bootstrap/cloudformation-execution-policy.json', import.meta.url), 'utf8')) as {
  Statement: Array<{ Action: string | string[]; Resource: string | string[] }>;
};

/** The IAM service prefix that creates each CloudFormation namespace's resources. */
const IAM_PREFIX: Record<string, string> = {
  ApplicationAutoScaling: 'application-autoscaling',
  AutoScaling: 'autoscaling',
  CloudWatch: 'cloudwatch',
  EC2: 'ec2',
  ECS: 'ecs',
  ElasticLoadBalancingV2: 'elasticloadbalancing',
  Events: 'events',
  IAM: 'iam',
  Logs: 'logs',
  S3: 's3',
  SecretsManager: 'secretsmanager',
  SNS: 'sns',
  WAFv2: 'wafv2',
};

describe('CloudFormation execution policy for cdk bootstrap', () => {
  // The widest configuration: CI role and OIDC provider, e-mail subscription, ECS Exec.
  const s = memo(() =>
    synth({ ...REQUIRED, imageUri: IMAGE_URI, githubRepo: 'acme/batchwise', alarmEmail: 'ops@example.com', enableExecuteCommand: 'true' }),
  );
  const actions = policy.Statement.flatMap((st) => [st.Action].flat());

  it('covers the service of every resource type the stack creates', () => {
    const namespaces = new Set(
      Object.values(s().template.toJSON().Resources as Record<string, { Type: string }>)
        .map((r) => r.Type.split('::'))
        .filter(([owner, namespace]) => owner === 'AWS' && namespace !== 'CDK')
        .map(([, namespace]) => namespace!),
    );
    for (const namespace of namespaces) {
      const prefix = IAM_PREFIX[namespace];
      expect(prefix, `AWS::${namespace}: add its IAM prefix to the policy and to this table`).toBeDefined();
      expect(
        actions.some((a) => a.startsWith(`${prefix}:`)),
        namespace,
      ).toBe(true);
    }
  });

  it('is narrower than AdministratorAccess: no "*" action, IAM only on the stack\'s own roles and the GitHub provider', () => {
    expect(actions).not.toContain('*');
    for (const statement of policy.Statement) {
      if (![statement.Action].flat().includes('iam:*')) continue;
      for (const resource of [statement.Resource].flat()) {
        expect(resource).toMatch(
          /^arn:aws:iam::\*:(role\/Batchwise-\*|instance-profile\/Batchwise-\*|oidc-provider\/token\.actions\.githubusercontent\.com)$/,
        );
      }
    }
  });

  it("names the stack's roles as the IAM statement expects (CloudFormation prefixes them with the stack name)", () => {
    const roles = s().template.findResources('AWS::IAM::Role');
    for (const role of Object.values(roles)) expect(role.Properties.RoleName).toBeUndefined();
    expect(s().stack.stackName).toMatch(/^Batchwise-/);
  });
});
