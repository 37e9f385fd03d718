import type { ChildProcess } from 'node:child_process';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';

export interface ChildServer {
  readonly process: ChildProcess;
  readonly url: string;
  readonly grpcAddress: string;
  readonly logs: unknown[];
  readonly exited: Promise<number | null>;
}

/** The real CLI in a child process (`batchwise serve`), on ephemeral ports; resolves once it is ready. */
export async function startChildServer(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ChildServer> {
  const server = await startServerProcess(args, env);
  return { process: server.child, url: server.httpUrl, grpcAddress: server.grpcAddress, logs: server.logs, exited: server.exited };
}
