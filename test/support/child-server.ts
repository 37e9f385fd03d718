import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

const MAIN = new URL('../../packages/server/src/cli/main.ts', import.meta.url).pathname;

export interface ChildServer {
  readonly process: ChildProcess;
  readonly url: string;
  readonly logs: unknown[];
  readonly exited: Promise<number | null>;
}

/** The real CLI in a child process (`batchwise serve`), on ephemeral ports; resolves once it is ready. */
export async function startChildServer(args: string[]): Promise<ChildServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'serve', '--http-address', '127.0.0.1', '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0', ...args], {
    cwd: new URL('..', import.meta.url).pathname,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: unknown[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    let port: number | undefined;
    lines.on('line', (line) => {
      let entry: any;
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      logs.push(entry);
      if (typeof entry.httpPort === 'number') port = entry.httpPort;
      if (entry.msg === 'model repository loaded' && port !== undefined) resolve(`http://127.0.0.1:${port}`);
    });
    void exited.then((code) => reject(new Error(`server exited early (${code}): ${stderr}`)));
  });
  return { process: child, url, logs, exited };
}
