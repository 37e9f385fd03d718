/**
 * Triton's CPU metrics on the metrics port (issue 35): a Triton dashboard or alert reading
 * nv_cpu_utilization, nv_cpu_memory_total_bytes or nv_cpu_memory_used_bytes finds them with Triton's
 * help texts and meaning (the host's, from /proc), polled at --metrics-interval-ms; and
 * --allow-cpu-metrics=false leaves them out, as in Triton.
 */
import { readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { parseMemInfo } from '../packages/server/src/metrics/cpu-monitor.ts';
import { startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

const scrape = async (server: Server) => (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
const sample = (text: string, name: string) => {
  const value = new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1];
  return value === undefined ? undefined : Number(value);
};

describe.runIf(process.platform === 'linux')("Triton's CPU metrics", () => {
  it('are exported with its help texts: utilization 0..1 between polls, host memory total and used', async () => {
    const server = await startTestServer([], { metricsIntervalMs: 100 });
    servers.push(server);
    const first = await scrape(server);
    expect(first).toContain('# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]\n# TYPE nv_cpu_utilization gauge\n');
    expect(first).toContain('# HELP nv_cpu_memory_total_bytes CPU total memory (RAM), in bytes\n# TYPE nv_cpu_memory_total_bytes gauge\n');
    expect(first).toContain('# HELP nv_cpu_memory_used_bytes CPU used memory (RAM), in bytes\n# TYPE nv_cpu_memory_used_bytes gauge\n');

    // Busy cores between two polls: the gauge moves off its initial 0 and stays a fraction.
    const busyUntil = Date.now() + 400;
    while (Date.now() < busyUntil);
    await expect.poll(async () => sample(await scrape(server), 'nv_cpu_utilization'), { timeout: 10_000 }).toBeGreaterThan(0);
    const text = await scrape(server);
    expect(sample(text, 'nv_cpu_utilization')).toBeLessThanOrEqual(1);

    // The host's memory, as /proc/meminfo says: the total exactly, used within what others allocate meanwhile.
    const host = parseMemInfo(await readFile('/proc/meminfo', 'utf8'));
    expect(sample(text, 'nv_cpu_memory_total_bytes')).toBe(host.totalBytes);
    const used = sample(text, 'nv_cpu_memory_used_bytes')!;
    expect(used).toBeGreaterThan(0);
    expect(used).toBeLessThan(host.totalBytes);
    // Host-wide, not this process: more than the server's own resident memory.
    expect(used).toBeGreaterThan(sample(text, 'batchwise_process_resident_memory_bytes')!);
  });

  it('are left out with --allow-cpu-metrics=false', async () => {
    const server = await startTestServer([], { cpuMetrics: false });
    servers.push(server);
    const text = await scrape(server);
    expect(text).not.toContain('nv_cpu_');
    expect(text).toContain('batchwise_process_resident_memory_bytes');
  });
});
