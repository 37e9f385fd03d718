/**
 * A start that finds a port taken fails with Node's `listen EADDRINUSE: address already in use
 * 0.0.0.0:8000`, which says neither who holds it nor what to do. The usual holder is the previous
 * server: after a stop it keeps its ports through --shutdown-grace-secs, so that load balancers can
 * deregister it. This says, in one line, which it is (asking the holder over HTTP) and how to avoid it.
 */

export interface ServePorts {
  readonly httpPort?: number;
  readonly grpcPort?: number;
  readonly metricsPort?: number;
}

const FLAGS = [
  ['httpPort', '--http-port'],
  ['grpcPort', '--grpc-port'],
  ['metricsPort', '--metrics-port'],
] as const;

/** Host and port of an EADDRINUSE error (Node's `listen EADDRINUSE: address already in use <host>:<port>`, from any of the three servers). */
export function addressInUse(error: unknown): { host: string; port: number } | undefined {
  const message = (error as Error | undefined)?.message;
  if (typeof message !== 'string') return undefined;
  const match = /EADDRINUSE: address already in use (\S+):(\d+)/.exec(message);
  return match ? { host: match[1]!, port: Number(match[2]) } : undefined;
}

/** What answers on the port: a server, ready or not (HTTP /v2/health/ready), or nothing we understand. */
async function askHolder(host: string, port: number): Promise<{ ready: boolean; name?: string } | undefined> {
  const loopback = host === '0.0.0.0' || host === '::' || host === '[::]' ? '127.0.0.1' : host.replace(/^\[(.*)\]$/, '$1');
  const base = `http://${loopback.includes(':') ? `[${loopback}]` : loopback}:${port}`;
  const get = (path: string) => fetch(`${base}${path}`, { signal: AbortSignal.timeout(1000) });
  try {
    const ready = await get('/v2/health/ready');
    await ready.body?.cancel();
    // Triton's protocol answers 200 when ready and 400 when not; anything else is no inference server.
    if (ready.status !== 200 && ready.status !== 400) return undefined;
    const metadata = (await get('/v2')
      .then((r) => r.json())
      .catch(() => undefined)) as { name?: unknown; version?: unknown } | undefined;
    const name = typeof metadata?.name === 'string' ? `${metadata.name} ${String(metadata.version ?? '')}`.trim() : undefined;
    return { ready: ready.status === 200, ...(name && { name }) };
  } catch {
    return undefined;
  }
}

/**
 * The error to report for a failed start: an EADDRINUSE one becomes one line saying who holds the
 * port and how to avoid it; any other error is returned as it is.
 */
export async function explainPortInUse(error: unknown, ports: ServePorts): Promise<unknown> {
  const inUse = addressInUse(error);
  if (!inUse) return error;
  const flag = FLAGS.find(([key]) => ports[key] === inUse.port)?.[1] ?? 'the port flags';
  const what = `port ${inUse.port} (${flag}) on ${inUse.host} is already in use (EADDRINUSE)`;
  const holder = await askHolder(inUse.host, inUse.port);
  let message: string;
  if (holder?.ready) {
    message = `${what} by another server that answers ready${holder.name ? ` (${holder.name})` : ''}: stop it, or start this one with another ${flag}`;
  } else if (holder) {
    message =
      `${what} by a server that is not ready${holder.name ? ` (${holder.name})` : ''}: most likely the previous one, still shutting down, ` +
      'which keeps its ports through --shutdown-grace-secs so that load balancers can deregister it (or one still loading); ' +
      'wait until it exits, or stop it now with a second Ctrl-C or SIGTERM; a Ctrl-C in a terminal skips the grace, and servers ' +
      'you restart by hand can start with --shutdown-grace-secs 0';
  } else {
    message =
      `${what} by another process: another server, or a previous Batchwise server still shutting down through --shutdown-grace-secs; ` +
      `stop it or wait until it exits, or start this one with another ${flag}`;
  }
  return Object.assign(new Error(message, { cause: error }), { code: 'EADDRINUSE' });
}
