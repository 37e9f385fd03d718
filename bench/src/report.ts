import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';

export const RESULTS_DIR = new URL('../results/', import.meta.url).pathname;

/** A fixed-width table for the terminal. */
export function table(headers: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (typeof c === 'number' ? formatNumber(c) : c)))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => String(r[i] ?? '').length)));
  const line = (r: readonly (string | number)[]) => r.map((c, i) => String(c).padStart(widths[i]!)).join('  ');
  return [line(cells[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

function formatNumber(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Number.isInteger(n)) return String(n);
  return Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2);
}

export async function writeResult(name: string, json: unknown, svg?: string): Promise<string[]> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const files = [join(RESULTS_DIR, `${name}.json`)];
  await writeFile(files[0]!, `${JSON.stringify(json, null, 2)}\n`);
  if (svg) {
    files.push(join(RESULTS_DIR, `${name}.svg`));
    await writeFile(files[1]!, svg);
  }
  return files;
}

/**
 * What the numbers were measured on. The 1-minute load average at the start tells whether
 * something else shared the cores (on a 2-core machine anything above ~0.5 skews a run).
 */
export function environment(): Record<string, unknown> {
  return {
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    loadAverage1m: loadavg()[0],
  };
}
