export {
  EPHEMERAL_PORT_FLAGS,
  spawnServer,
  startServerProcess,
  type ServerProcess,
  type StartServerOptions,
} from '../src/cli/server-process.ts';

/** Reads one gauge or counter (without labels) from a Prometheus text page. */
export async function scrapeMetric(metricsUrl: string, name: string): Promise<number | undefined> {
  const text = await (await fetch(metricsUrl)).text();
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : undefined;
}
