/**
 * The task's `batchwise serve` command line and environment use only what the server declares
 * (packages/server/src/options/serve-flags.ts), so a renamed or removed flag fails here, not
 * at the first deployment.
 */
import { describe, expect, it } from 'vitest';
import { SERVE_ENVIRONMENT, SERVE_FLAGS } from '../../packages/server/src/options/index.ts';
import { MODEL_REPOSITORY_KEY_ENV } from '../lib/server-metrics.ts';
import { IMAGE_URI, REQUIRED, only, synth } from './synth.ts';

describe("the task's serve command", () => {
  const container = () =>
    only(synth({ ...REQUIRED, imageUri: IMAGE_URI }).template, 'AWS::ECS::TaskDefinition').props.ContainerDefinitions[0];

  it('names only flags that serve declares', () => {
    const command: unknown[] = container().Command;
    const flags = command.filter((part): part is string => typeof part === 'string' && part.startsWith('--'));
    expect(flags.length).toBeGreaterThan(0);
    const declared = SERVE_FLAGS.map((d) => d.flag as string);
    for (const flag of flags) expect(declared, `${flag} is not a declared serve flag`).toContain(flag);
  });

  it('passes the repository key in the variable the server reads', () => {
    expect(SERVE_ENVIRONMENT.map((e) => e.name as string)).toContain(MODEL_REPOSITORY_KEY_ENV);
    expect(container().Secrets.map((s: { Name: string }) => s.Name)).toContain(MODEL_REPOSITORY_KEY_ENV);
  });
});
