import { spawn } from 'node:child_process';
import { SERVER_CLIS } from '../../packages/server/src/cli/server-process.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * `batchwise <args>` from the compiled CLI, as the image's entrypoint starts it. `env` is added to
 * this process's environment; a variable set to undefined is removed from the child's.
 */
export function runCli(args: readonly string[], env: Readonly<Record<string, string | undefined>> = {}): Promise<CliRun> {
  const cli = SERVER_CLIS.compiled;
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete childEnv[name];
    else childEnv[name] = value;
  }
  const child = spawn(process.execPath, [...cli.nodeArgs, cli.script, ...args], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => void (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
