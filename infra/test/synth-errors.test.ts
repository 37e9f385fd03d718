import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { CERTIFICATE_ARN, INGRESS_CIDR } from './synth.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CDK = fileURLToPath(new URL('../node_modules/.bin/cdk', import.meta.url));
const OUT = mkdtempSync(join(tmpdir(), 'batchwise-cdk-out-'));
afterAll(() => rmSync(OUT, { recursive: true, force: true }));

/** The real `cdk synth` of the repository's app (cdk.json's `npx tsx infra/bin/app.ts`), offline. */
function cdkSynth(...context: string[]): { status: number | null; stderr: string } {
  const args = ['synth', '--quiet', '--no-notices', '--output', OUT, ...context.flatMap((c) => ['-c', c])];
  const env = { ...process.env, CDK_DEBUG: undefined, CDK_DEFAULT_REGION: undefined };
  const run = spawnSync(CDK, args, { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
  return { status: run.status, stderr: run.stderr };
}

/** What a crash looks like: Node's source line with a caret, and stack frames. */
function expectNoStackTrace(stderr: string): void {
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(stderr).not.toMatch(/^\s*\^\s*$/m);
  expect(stderr).not.toMatch(/throw new/);
  expect(stderr).not.toMatch(/infra\/(bin|lib)\/\w+\.ts:\d+/);
}

describe('cdk synth with a setting it cannot use', () => {
  it('says a missing certificateArn in one line, naming the environment file it is read from, and exits non-zero', () => {
    const { status, stderr } = cdkSynth(`allowedIngressCidr=${INGRESS_CIDR}`, 'envName=staging');
    expect(status).not.toBe(0);
    expectNoStackTrace(stderr);
    const lines = stderr.split('\n').filter((line) => line.includes("Context 'certificateArn'"));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^Context 'certificateArn': required: .*-c certificateArn=.*infra\/environments\/staging\.json\.$/);
    expect(stderr).not.toContain('cdk.json');
  });

  it("says a construct's check of a context value in one line", () => {
    const { status, stderr } = cdkSynth(`certificateArn=${CERTIFICATE_ARN}`, `allowedIngressCidr=${INGRESS_CIDR}`, 'natGateways=3');
    expect(status).not.toBe(0);
    expectNoStackTrace(stderr);
    expect(stderr.split('\n').filter((line) => line.includes('natGateways'))).toEqual([
      'natGateways must be 1 or 2 (private subnets need egress), got 3.',
    ]);
  });

  it('says in one line when model groups need more listener rules than an ALB allows', () => {
    const many = Array.from({ length: 143 }, (_, i) => `model-${i}`);
    const groups = JSON.stringify([
      { name: 'rest', models: ['*'] },
      { name: 'many', models: many },
    ]);
    const { status, stderr } = cdkSynth(`certificateArn=${CERTIFICATE_ARN}`, `allowedIngressCidr=${INGRESS_CIDR}`, `modelGroups=${groups}`);
    expect(status).not.toBe(0);
    expectNoStackTrace(stderr);
    const lines = stderr.split('\n').filter((line) => line.includes('listener rules'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^modelGroups: the groups need 101 listener rules \(72 by path on :8000, 29 by header on :8001\), more than the 100 /,
    );
  });
});
