/** `pnpm docs:cli`: writes docs/cli.md and README's CLI at a glance from the declaration of serve's flags. */
import { readFileSync, writeFileSync } from 'node:fs';
import { cliReference, withCliAtAGlance } from './cli-reference.ts';

const reference = new URL('../../../../docs/cli.md', import.meta.url);
writeFileSync(reference, cliReference());
const readme = new URL('../../../../README.md', import.meta.url);
writeFileSync(readme, withCliAtAGlance(readFileSync(readme, 'utf8')));
process.stdout.write(`wrote ${reference.pathname} and the CLI at a glance in ${readme.pathname}\n`);
