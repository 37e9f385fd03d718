/**
 * docs/cli.md, README's CLI at a glance and `batchwise serve --help` come from one declaration
 * (packages/server/src/options/serve-flags.ts): the files must be what `pnpm docs:cli` writes.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cliReference, withCliAtAGlance } from '../packages/server/src/cli/cli-reference.ts';
import { serveCommand } from '../packages/server/src/cli/serve.ts';
import { WITHOUT_EFFECT } from '../packages/server/src/cli/triton-flags.ts';
import { SERVE_FLAGS } from '../packages/server/src/options/index.ts';

describe('the CLI reference', () => {
  it('docs/cli.md is up to date with the declaration of serve flags (run `pnpm docs:cli`)', () => {
    const written = readFileSync(new URL('../docs/cli.md', import.meta.url), 'utf8');
    expect(written, 'docs/cli.md is out of date: run `pnpm docs:cli`').toBe(cliReference());
  });

  it("README's CLI at a glance is up to date with the declaration (run `pnpm docs:cli`)", () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    expect(readme, "README's CLI at a glance is out of date: run `pnpm docs:cli`").toBe(withCliAtAGlance(readme));
  });

  it('names every declared flag, and every Triton flag accepted without effect, in the reference and in --help', () => {
    const reference = cliReference();
    const help = serveCommand().helpInformation();
    for (const flag of [...SERVE_FLAGS.map((d) => d.flag), ...WITHOUT_EFFECT.map((f) => `--${f.flag}`)]) {
      expect(reference).toContain(`\`${flag} `.replace(/ $/, ''));
      expect(help).toContain(`${flag} `);
    }
  });
});
