import { mkdir, writeFile } from 'node:fs/promises';
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
