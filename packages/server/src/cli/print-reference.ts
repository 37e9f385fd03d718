/** `pnpm docs:cli`: writes docs/cli.md from the declaration of serve's flags. */
import { writeFileSync } from 'node:fs';
import { cliReference } from './cli-reference.ts';

const path = new URL('../../../../docs/cli.md', import.meta.url);
writeFileSync(path, cliReference());
process.stdout.write(`wrote ${path.pathname}\n`);
