import { execFileSync } from 'node:child_process';

/**
 * Child-process servers in the tests run the compiled CLI, as the image does (BATCHWISE_SERVER_CLI
 * in vitest.config.ts): compile what changed first, so that a single `npx vitest run <file>` after
 * an edit does not start yesterday's server. Incremental; well under a second when nothing changed.
 */
export default function setup(): void {
  execFileSync('pnpm', ['run', '--silent', 'build'], { cwd: new URL('.', import.meta.url).pathname, stdio: 'inherit' });
}
