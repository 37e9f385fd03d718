/**
 * ONNX Runtime's profile of one execution (SessionOptions `enableProfiling`): the session writes a
 * Chrome-trace JSON array when it ends profiling; each `model_run` (cat `Session`) spans one
 * session.run, and the nodes it ran are `<node>_kernel_time` events (cat `Node`) whose `args` name
 * the op and the execution provider. Copies between the host and a device inside the graph are
 * Memcpy nodes (MemcpyFromHost: an upload, MemcpyToHost: a read-back); copies of the graph's own
 * inputs and outputs are made around the nodes, so they are in `model_run` and in no node.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ort from 'onnxruntime-node';

export interface ProfileEvent {
  readonly cat: string;
  readonly name: string;
  readonly ts: number;
  readonly dur: number;
  readonly args?: Readonly<Record<string, unknown>>;
}

export interface ProfiledNode {
  readonly node: string;
  readonly op: string;
  readonly provider: string;
  readonly us: number;
}

export interface ProfileSummary {
  /** Every model_run in the profile, in order (the first includes what a first run sets up). */
  readonly runsUs: readonly number[];
  /** The last model_run: the one summarized. */
  readonly runUs: number;
  readonly nodes: readonly ProfiledNode[];
  /** Per provider: nodes and their summed time (µs). */
  readonly byProvider: Readonly<Record<string, { readonly nodes: number; readonly us: number }>>;
  /** Memcpy nodes inside the graph. */
  readonly uploads: { readonly nodes: number; readonly us: number };
  readonly readBacks: { readonly nodes: number; readonly us: number };
  /** Nodes that are not copies (the model's arithmetic, or what a provider dispatches of it). */
  readonly kernels: { readonly nodes: number; readonly us: number };
  /** The run's time in no node: the graph inputs' and outputs' copies, waiting for the device, the executor. */
  readonly outsideNodesUs: number;
  /** Other events within the run (the executor's span, a provider's own), by category and name. */
  readonly others: readonly { readonly cat: string; readonly name: string; readonly count: number; readonly us: number }[];
  /** Events before the first run (loading, initialization), by name. */
  readonly setup: readonly { readonly name: string; readonly us: number }[];
}

const isCopy = (op: string) => /^Memcpy/.test(op);

export function summarizeProfile(events: readonly ProfileEvent[]): ProfileSummary {
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((a, b) => a.ts - b.ts);
  const last = runs.at(-1);
  if (!last) throw new Error(`the profile has no model_run event (${events.length} events)`);
  const end = last.ts + last.dur;
  // A microsecond of slack: events are rounded to whole microseconds.
  const inside = events.filter((e) => e !== last && e.ts >= last.ts && e.ts + e.dur <= end + 1);
  const nodes: ProfiledNode[] = inside
    .filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'))
    .map((e) => ({
      node: e.name.slice(0, -'_kernel_time'.length),
      op: String(e.args?.['op_name'] ?? '?'),
      provider: String(e.args?.['provider'] ?? '?'),
      us: e.dur,
    }));
  const byProvider: Record<string, { nodes: number; us: number }> = {};
  for (const n of nodes) {
    const p = (byProvider[n.provider] ??= { nodes: 0, us: 0 });
    p.nodes++;
    p.us += n.us;
  }
  const sum = (list: readonly ProfiledNode[]) => ({ nodes: list.length, us: list.reduce((t, n) => t + n.us, 0) });
  const others = new Map<string, { cat: string; name: string; count: number; us: number }>();
  for (const e of inside) {
    if (e.cat === 'Node' && (e.name.endsWith('_kernel_time') || /_fence_(before|after)$/.test(e.name))) continue;
    const key = `${e.cat}\0${e.name}`;
    const o = others.get(key) ?? { cat: e.cat, name: e.name, count: 0, us: 0 };
    o.count++;
    o.us += e.dur;
    others.set(key, o);
  }
  const firstRun = runs[0]!.ts;
  return {
    runsUs: runs.map((r) => r.dur),
    runUs: last.dur,
    nodes,
    byProvider,
    uploads: sum(nodes.filter((n) => n.op === 'MemcpyFromHost')),
    readBacks: sum(nodes.filter((n) => n.op === 'MemcpyToHost')),
    kernels: sum(nodes.filter((n) => !isCopy(n.op))),
    outsideNodesUs: last.dur - nodes.reduce((t, n) => t + n.us, 0),
    others: [...others.values()].sort((a, b) => b.us - a.us),
    setup: events.filter((e) => e.cat === 'Session' && e.ts < firstRun).map((e) => ({ name: e.name, us: e.dur })),
  };
}

/** The summary in words and tables, for the report. */
export function profileLines(s: ProfileSummary): string[] {
  const ms = (us: number) => (us / 1000).toFixed(3);
  const lines = [
    `model_run of the profiled execution: ${ms(s.runUs)} ms (every run in the profile, ms: ${s.runsUs.map(ms).join(', ')})`,
    `- nodes: ${s.nodes.length}; kernels (not copies) ${s.kernels.nodes}, ${ms(s.kernels.us)} ms; uploads (MemcpyFromHost) ${s.uploads.nodes}, ${ms(s.uploads.us)} ms; read-backs (MemcpyToHost) ${s.readBacks.nodes}, ${ms(s.readBacks.us)} ms`,
    `- in no node: ${ms(s.outsideNodesUs)} ms (the graph inputs' upload and outputs' read-back, waiting for the device, the executor)`,
    `- by provider: ${
      Object.entries(s.byProvider)
        .map(([p, v]) => `${p} ${v.nodes} nodes, ${ms(v.us)} ms`)
        .join('; ') || 'no node events'
    }`,
    '',
    '| node | op | provider | ms |',
    '| --- | --- | --- | --- |',
    ...[...s.nodes]
      .sort((a, b) => b.us - a.us)
      .slice(0, 40)
      .map((n) => `| ${n.node} | ${n.op} | ${n.provider} | ${ms(n.us)} |`),
  ];
  if (s.others.length)
    lines.push(
      '',
      'Other events within the run:',
      '',
      '| category | name | count | ms |',
      '| --- | --- | --- | --- |',
      ...s.others.slice(0, 20).map((o) => `| ${o.cat} | ${o.name} | ${o.count} | ${ms(o.us)} |`),
    );
  if (s.setup.length) lines.push('', `Before the first run: ${s.setup.map((e) => `${e.name} ${ms(e.us)} ms`).join('; ')}`);
  return lines;
}

export interface ProfiledRun {
  readonly summary: ProfileSummary;
  /** The profile file ONNX Runtime wrote. */
  readonly file: string;
  /** session.run of the same batch in this process without profiling, ms: the median and the fastest of `runs` (none when `bareRuns` is 0). */
  readonly bare: { readonly runs: number; readonly medianMs: number; readonly minMs: number };
}

/**
 * Profiles `warmups` + 1 runs of `feeds` on a session of `providers` (profiling on from its
 * creation), summarizing the last; then times `bareRuns` runs of a session without profiling.
 */
export async function profileExecution(options: {
  readonly modelFile: string;
  readonly providers: readonly string[];
  readonly feeds: Record<string, ort.Tensor>;
  readonly dir: string;
  readonly warmups: number;
  readonly bareRuns: number;
}): Promise<ProfiledRun> {
  const prefix = join(options.dir, 'ort-profile');
  const before = new Set(readdirSync(options.dir));
  const session = await ort.InferenceSession.create(options.modelFile, {
    executionProviders: [...options.providers],
    enableProfiling: true,
    profileFilePrefix: prefix,
  });
  try {
    for (let i = 0; i <= options.warmups; i++) await session.run(options.feeds);
    session.endProfiling();
  } finally {
    await session.release();
  }
  const written = readdirSync(options.dir).filter((f) => !before.has(f) && f.startsWith('ort-profile') && f.endsWith('.json'));
  if (written.length === 0) throw new Error(`ONNX Runtime wrote no profile under ${prefix}*.json`);
  const file = join(options.dir, written.sort().at(-1)!);
  const summary = summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as ProfileEvent[]);

  const times: number[] = [];
  if (options.bareRuns <= 0) return { summary, file, bare: { runs: 0, medianMs: 0, minMs: 0 } };
  const bare = await ort.InferenceSession.create(options.modelFile, { executionProviders: [...options.providers] });
  try {
    for (let i = 0; i < options.warmups; i++) await bare.run(options.feeds);
    for (let i = 0; i < options.bareRuns; i++) {
      const t0 = performance.now();
      await bare.run(options.feeds);
      times.push(performance.now() - t0);
    }
  } finally {
    await bare.release();
  }
  times.sort((a, b) => a - b);
  return {
    summary,
    file,
    bare: { runs: times.length, medianMs: times[Math.floor(times.length / 2)] ?? 0, minMs: times[0] ?? 0 },
  };
}
