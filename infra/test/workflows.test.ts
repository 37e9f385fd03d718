import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const workflow = (name: string) => readFileSync(new URL(`../../.github/workflows/${name}`, import.meta.url), 'utf8');
/** The text of a top-level YAML section (`on:`, `jobs:`), up to the next one. */
const section = (text: string, key: string) => new RegExp(`^${key}:\\n((?:[ #].*\\n|\\n)*)`, 'm').exec(text)?.[1] ?? '';

describe('deploy workflow', () => {
  const deploy = workflow('deploy.yml');

  it('runs only after CI passed, on the commit CI tested', () => {
    expect(/^name: ci$/m.test(workflow('ci.yml'))).toBe(true);
    const on = section(deploy, 'on');
    expect(on).toMatch(/workflow_run:\n\s+workflows: \[ci\]\n\s+types: \[completed\]\n\s+branches: \[main\]/);
    expect(on).not.toMatch(/^\s+push:/m);
    expect(deploy).toContain("github.event.workflow_run.conclusion == 'success' && github.event.workflow_run.event == 'push'");
    expect(deploy).toContain('DEPLOY_SHA: ${{ github.event.workflow_run.head_sha || github.sha }}');
    expect(deploy).toMatch(/- uses: actions\/checkout@v4\n\s+with:\n\s+ref: \$\{\{ env\.DEPLOY_SHA \}\}/);
    // By hand: only a commit with a successful CI run.
    expect(deploy).toContain('actions/workflows/ci.yml/runs?head_sha=$DEPLOY_SHA&status=success');
  });

  it('never writes to the production model repository', () => {
    expect(deploy).not.toMatch(/aws s3 (cp|sync|mv|rm)|s3api (put|delete)|pnpm examples|models promote/);
  });
});

describe('promotion workflow', () => {
  it('never sends the repository key over http://', () => {
    const promote = workflow('promote-model.yml');
    const guard = promote.indexOf('if [[ "$SERVER_URL" != https://* ]]; then');
    const exported = promote.indexOf('echo "BATCHWISE_API_KEY=$key" >> "$GITHUB_ENV"');
    expect(guard).toBeGreaterThan(0);
    expect(exported).toBeGreaterThan(guard);
    // The key is read after the guard, which leaves the step before reading it.
    expect(promote.slice(guard, exported)).toMatch(/exit 0[\s\S]*get-secret-value/);
  });
});

describe('promotion workflow, canary mode', () => {
  const promote = workflow('promote-model.yml');

  it('offers a canary mode that releases step by step with models canary, and skips the all-at-once promote', () => {
    expect(section(promote, 'on')).toMatch(/mode:[\s\S]*type: choice\n\s+options: \[promote, canary\]\n\s+default: promote/);
    expect(section(promote, 'on')).toMatch(/canary_steps:[\s\S]*default: 5,25,50,100/);
    expect(promote).toMatch(/- name: promote and wait until served\n\s+if: inputs.mode != 'canary'/);
    const canary = promote.slice(promote.indexOf('- name: canary release, step by step'));
    expect(canary).toMatch(/^- name: canary release, step by step\n\s+if: inputs.mode == 'canary'/);
    expect(canary).toMatch(/pnpm batchwise models canary "\$MODEL" \\\n(\s+--[a-z-]+ "\$[A-Z_]+" \\\n)+/);
    // The default release (steps x interval) and three more intervals for an unjudged step fit in the step's timeout.
    const minutes = (re: RegExp) => Number(re.exec(promote)![1]);
    const steps = /canary_steps:[\s\S]*?default: ([\d,]+)/.exec(promote)![1]!.split(',').length;
    const interval = minutes(/canary_interval:[\s\S]*?default: (\d+)m/);
    const stepTimeout = minutes(/- name: canary release, step by step\n\s+if: [^\n]+\n\s+timeout-minutes: (\d+)/);
    expect(stepTimeout).toBeGreaterThanOrEqual((steps + 3) * interval);
    expect(minutes(/\n {4}timeout-minutes: (\d+)/)).toBeGreaterThan(stepTimeout);
    for (const flag of [
      '--file "$FILE"',
      '--steps "$STEPS"',
      '--interval "$INTERVAL"',
      '--region "$REGION"',
      '--service-name "$SERVICE_NAME"',
    ]) {
      expect(canary).toContain(flag);
    }
  });
});
