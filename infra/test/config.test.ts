import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { describe, expect, it } from 'vitest';
import { applyEnvironmentFile, CONTEXT_KEYS, ENVIRONMENTS_DIR, stackPropsFromContext } from '../lib/config.ts';
import { CERTIFICATE_ARN, IMAGE_URI, REQUIRED, buildApp } from './synth.ts';
import { GPU_INSTANCE_TYPES, hostHeadroomMiB, taskMemoryFor } from '../lib/instance-types.ts';
import { EMF_METRICS } from '../../packages/server/src/metrics/emf-metrics.ts';
import { SERVER_METRICS } from '../lib/server-metrics.ts';

const base = { ...REQUIRED, imageUri: IMAGE_URI };
const build = (context: Record<string, unknown>) => () => buildApp({ ...base, ...context });

describe('context validation', () => {
  it('requires certificateArn and says which key and why', () => {
    expect(() => buildApp({ imageUri: IMAGE_URI })).toThrow(/Context 'certificateArn': required: .*HTTPS.*-c certificateArn=/);
  });

  it('requires allowedIngressCidr, so the endpoint is never public by accident, and takes 0.0.0.0/0 when said', () => {
    expect(() => buildApp({ certificateArn: CERTIFICATE_ARN, imageUri: IMAGE_URI })).toThrow(
      /Context 'allowedIngressCidr': required: .*0\.0\.0\.0\/0 to make the endpoint public on purpose/,
    );
    expect(build({ allowedIngressCidr: 'everyone' })).toThrow(/Context 'allowedIngressCidr': 'everyone' is not an IPv4 CIDR/);
    expect(build({ allowedIngressCidr: '0.0.0.0/0' })).not.toThrow();
  });

  it("rejects a certificate from another region than the stack's", () => {
    expect(build({ certificateArn: 'arn:aws:acm:eu-west-1:123456789012:certificate/example' })).toThrow(
      /certificateArn is in eu-west-1 but the stack deploys to us-east-1: an ALB needs an ACM certificate of its own region/,
    );
  });

  it('rejects a malformed certificateArn', () => {
    expect(build({ certificateArn: 'my-cert' })).toThrow(/Context 'certificateArn': 'my-cert' is not an ACM certificate ARN/);
  });

  it('rejects an instance type outside the table unless the memory is given', () => {
    expect(build({ instanceType: 'p9.huge' })).toThrow(/Unknown instance type 'p9.huge'.*context 'memoryLimitMiB'/);
    expect(build({ instanceType: 'p9.huge', memoryLimitMiB: '20000' })).not.toThrow();
  });

  it('rejects a hard limit larger than the instance can give one task', () => {
    expect(build({ memoryLimitMiB: 16384 })).toThrow(/memoryLimitMiB 16384 does not fit g4dn.xlarge: at most 14336 MiB/);
  });

  it('rejects minCapacity > maxCapacity', () => {
    expect(build({ minCapacity: '5', maxCapacity: '2' })).toThrow(/Context 'minCapacity': \(5\) must not exceed maxCapacity \(2\)/);
  });

  it('refuses desiredCount, saying that autoscaling owns the task count', () => {
    expect(build({ desiredCount: '2' })).toThrow(/Context key 'desiredCount' in the context is no longer read: .*set minCapacity instead/);
  });

  it('rejects values of the wrong type or shape, naming the key', () => {
    expect(build({ minCapacity: 'two' })).toThrow(/Context 'minCapacity': expected an integer/);
    expect(build({ enableExecuteCommand: 'yes' })).toThrow(/Context 'enableExecuteCommand': expected true or false/);
    expect(build({ wafRateLimitPer5Minutes: '5' })).toThrow(/Context 'wafRateLimitPer5Minutes': must lie within 10\.\.2000000000/);
    expect(build({ amiVariant: 'ubuntu' })).toThrow(/Context 'amiVariant': expected one of al2023, al2/);
    expect(build({ serverImage: 'rocm' })).toThrow(/Context 'serverImage': expected one of cuda, webgpu, got 'rocm'/);
    expect(build({ amiId: 'latest' })).toThrow(/Context 'amiId'/);
    expect(build({ httpListenerProtocol: 'TCP' })).toThrow(/Context 'httpListenerProtocol'/);
    expect(build({ githubRepo: 'batchwise' })).toThrow(/Context 'githubRepo'/);
    expect(build({ alarmEmail: 'nobody' })).toThrow(/Context 'alarmEmail'/);
    expect(build({ modelPrefix: '/models/' })).toThrow(/modelPrefix '\/models\/' is not a valid key prefix/);
  });
});

describe('unknown context keys', () => {
  it('refuses a mistyped key instead of ignoring it, suggesting the known one', () => {
    expect(build({ alarmEmial: 'ops@example.com' })).toThrow(
      /Unknown context key 'alarmEmial' in the context \(did you mean 'alarmEmail'\?\)\. Known keys: envName, /,
    );
    expect(build({ maxcapacity: '8' })).toThrow(/'maxcapacity'.*did you mean 'maxCapacity'/);
    expect(build({ replicas: '2' })).toThrow(/Unknown context key 'replicas' in the context\. Known keys/);
  });

  it('leaves CDK feature flags, CLI settings and lookups alone', () => {
    expect(
      build({
        '@aws-cdk/core:bootstrapQualifier': 'abc',
        'aws:cdk:enable-path-metadata': true,
        'acknowledged-issue-numbers': [1],
        'availability-zones:account=123456789012:region=us-east-1': ['us-east-1a'],
      }),
    ).not.toThrow();
  });
});

describe('environment settings file', () => {
  const dir = () => {
    const d = mkdtempSync(join(tmpdir(), 'batchwise-env-'));
    writeFileSync(join(d, 'prod.json'), JSON.stringify({ ...REQUIRED, alarmEmail: 'ops@example.com', maxCapacity: 8, natGateways: 2 }));
    writeFileSync(join(d, 'typo.json'), JSON.stringify({ ...REQUIRED, natGateway: 2 }));
    return d;
  };
  const read = (context: Record<string, unknown>, d: string) => {
    const app = new App({ context });
    const file = applyEnvironmentFile(app.node, d);
    return { file, props: stackPropsFromContext(app.node) };
  };

  it('gives every deploy of the environment the same settings', () => {
    const { file, props } = read({ envName: 'prod' }, dir());
    expect(file).toMatch(/prod\.json$/);
    expect(props).toMatchObject({
      envName: 'prod',
      certificateArn: CERTIFICATE_ARN,
      alarmEmail: 'ops@example.com',
      maxCapacity: 8,
      natGateways: 2,
    });
  });

  it('lets -c override the file for one run', () => {
    expect(read({ envName: 'prod', maxCapacity: '6' }, dir()).props.maxCapacity).toBe(6);
  });

  it('refuses unknown keys in the file, naming the file', () => {
    expect(() => read({ envName: 'typo' }, dir())).toThrow(
      /Unknown context key 'natGateway' in .*typo\.json \(did you mean 'natGateways'\?\)/,
    );
  });

  it('is optional: no file, only the context', () => {
    const { file, props } = read({ envName: 'staging', ...REQUIRED }, dir());
    expect(file).toBeUndefined();
    expect(props.alarmEmail).toBeUndefined();
  });

  it('ships a template whose settings validate', () => {
    const app = new App({ context: { envName: 'example' } });
    expect(applyEnvironmentFile(app.node, ENVIRONMENTS_DIR)).toMatch(/infra\/environments\/example\.json$/);
    expect(stackPropsFromContext(app.node)).toMatchObject({
      envName: 'example',
      githubRepo: 'acme/batchwise',
      alarmEmail: 'ops@example.com',
    });
  });
});

describe('instance type table', () => {
  it('leaves host headroom on every type and keeps the server budget below the hard limit', () => {
    for (const [type, spec] of Object.entries(GPU_INSTANCE_TYPES)) {
      const m = taskMemoryFor(type);
      expect(m.hardLimitMiB * spec.gpuCount + hostHeadroomMiB(spec.memoryMiB)).toBeLessThanOrEqual(spec.memoryMiB);
      expect(m.serverBudgetBytes).toBeLessThan(m.hardLimitMiB * 1024 * 1024);
      expect(m.reservationMiB).toBeLessThan(m.hardLimitMiB);
    }
  });

  it('covers the g4dn, g5 and g6 sizes', () => {
    for (const size of ['xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '16xlarge']) {
      for (const family of ['g4dn', 'g5', 'g6']) expect(GPU_INSTANCE_TYPES[`${family}.${size}`]).toBeDefined();
    }
  });
});

describe('server metrics contract', () => {
  it('reads the names and units the server writes, each with a statistic', () => {
    expect(Object.keys(SERVER_METRICS)).toEqual(Object.keys(EMF_METRICS));
    for (const [key, spec] of Object.entries(SERVER_METRICS)) {
      const emf = EMF_METRICS[key as keyof typeof EMF_METRICS];
      expect(spec).toMatchObject({ name: emf.name, unit: emf.unit });
      expect(['Sum', 'Average', 'Maximum', 'p99']).toContain(spec.statistic);
    }
    expect(SERVER_METRICS.requestLatency.statistic).toBe('p99');
  });
});

describe('the context reference (infra/docs/context.md)', () => {
  it('has a row for every context key the stack reads, and none for a key it does not', () => {
    const page = readFileSync(new URL('../docs/context.md', import.meta.url), 'utf8');
    const documented = [...page.matchAll(/^\| `(\w+)`(?: \/ `(\w+)`)? \|/gm)].flatMap((m) => m.slice(1).filter(Boolean));
    expect([...documented].sort()).toEqual([...CONTEXT_KEYS].sort());
  });
});
