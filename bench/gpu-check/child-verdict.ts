/**
 * A step's work in a child process of the check (Dawn's failures can take the process with them):
 * the child writes one line, `mark` then its verdict as JSON, among whatever else it logs.
 */
import { spawn } from 'node:child_process';

export interface ChildVerdict<T> {
  /** The child's verdict, when it wrote one. */
  readonly verdict?: T;
  /** Everything else it wrote, stdout and stderr. */
  readonly log: string;
  /** How it ended, in words: its exit code or signal (SIGKILL after `timeoutMs`). */
  readonly ended: string;
}

/** Runs `node args...` (this Node), killing it after `timeoutMs`; resolves with its verdict and log. */
export function runChildForVerdict<T>(args: readonly string[], mark: string, timeoutMs: number): Promise<ChildVerdict<T>> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const lines = output.split('\n');
      const line = lines.find((l) => l.startsWith(mark));
      resolve({
        ...(line !== undefined && { verdict: JSON.parse(line.slice(mark.length)) as T }),
        log: lines.filter((l) => !l.startsWith(mark)).join('\n'),
        ended: String(signal ?? code),
      });
    });
  });
}
