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

/** A target of an issue, met or not, as a scenario prints it (PASS/MISS) and stores it. */
export interface Check {
  readonly target: string;
  readonly pass: boolean;
  readonly detail: string;
}

/** A ratio against its bound: target `name <= 1.5`, detail the value (and `detail` after it). */
/** The ratios no check reports (a check's target begins with its ratio's name): each as a note line. */
export function uncheckedRatioNotes(ratios: Readonly<Record<string, number>>, checks: readonly Check[]): string[] {
  return Object.entries(ratios)
    .filter(([k]) => !checks.some((c) => c.target.startsWith(`${k} `)))
    .map(([k, v]) => `${k}: ${v.toFixed(2)}`);
}

export function ratioCheck(name: string, value: number, bound: { atMost: number } | { atLeast: number }, detail = ''): Check {
  const pass = 'atMost' in bound ? value <= bound.atMost : value >= bound.atLeast;
  const target = `${name} ${'atMost' in bound ? `<= ${bound.atMost}` : `>= ${bound.atLeast}`}`;
  return { target, pass, detail: `${value.toFixed(2)}${detail ? ` (${detail})` : ''}` };
}

/** `PASS target: detail` or `MISS ...`. */
function formatCheck(c: Check): string {
  return `${c.pass ? 'PASS' : 'MISS'} ${c.target}: ${c.detail}`;
}

type Rows = readonly (readonly (string | number)[])[];

/** A markdown table; numbers as on the terminal. */
function markdownTable(headers: readonly string[], rows: Rows): string {
  const cell = (c: string | number) => (typeof c === 'number' ? formatNumber(c) : c);
  return [
    `| ${headers.join(' | ')} |`,
    `| ${headers.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');
}

/** What a scenario with targets reports: its tables, notes and PASS/MISS checks. */
export interface ScenarioReport {
  /** bench/results/<name>.json and .md */
  readonly name: string;
  /** The markdown report's heading. */
  readonly title: string;
  /** The markdown report's first paragraph: what was measured, and how. */
  readonly intro: string;
  readonly tables: readonly { readonly caption?: string; readonly headers: readonly string[]; readonly rows: Rows }[];
  /** Lines printed between the tables and the checks (figures without a target). */
  readonly notes?: readonly string[];
  readonly checks: readonly Check[];
  /** What bench/results/<name>.json holds. */
  readonly json: unknown;
}

/**
 * Prints the tables, the notes and a PASS/MISS line per check, and writes the JSON and a markdown
 * report (heading, intro, tables, notes, checks) to bench/results/.
 */
export async function reportScenario(report: ScenarioReport, log: (line: string) => void): Promise<void> {
  for (const t of report.tables) log(`\n${t.caption ? `${t.caption}:\n` : ''}${table(t.headers, t.rows)}\n`);
  for (const line of report.notes ?? []) log(line);
  for (const c of report.checks) log(formatCheck(c));
  await writeResult(report.name, report.json);
  const markdown = [
    `# ${report.title}`,
    '',
    report.intro,
    '',
    ...report.tables.flatMap((t) => [...(t.caption ? [`${t.caption}:`, ''] : []), markdownTable(t.headers, t.rows), '']),
    ...(report.notes?.length ? [...report.notes.map((n) => `- ${n}`), ''] : []),
    ...report.checks.map((c) => `- **${c.pass ? 'PASS' : 'MISS'}** ${c.target}: ${c.detail}`),
  ];
  await writeFile(join(RESULTS_DIR, `${report.name}.md`), `${markdown.join('\n')}\n`);
}
