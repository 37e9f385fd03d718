import { mlp } from '@batchwise/modelgen';
import { sleep, type WindowOptions } from '@batchwise/client/load';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { openInProcess, type ReplayWindow } from '../in-process.ts';
import { leanFp32Client } from '../lean-http.ts';
import { measureLean, type LeanReading } from '../lean-measure.ts';
import { environment, ratioCheck, reportScenario, type Check } from '../report.ts';
import { classifyThreads, THREAD_GROUPS } from '../threads.ts';
import { benchRepository, cachedModel } from '../workload.ts';
import { batchingConfig, type BatchingModel } from './batching.ts';

/** Rows per CPU-second (issue 34: 0.8; issue 30 asked 0.7) and rows per second (issue 30) of the server over the same model in-process. */
const ROWS_PER_CPU_SECOND_TARGET = 0.8;
const ROWS_PER_SECOND_TARGET = 0.6;
/** Pause before an in-process window, for the server's tail of work after a load (as in `batching`). */
const SETTLE_MS = 250;
/** The load that tells the server's threads apart, before the measurements. */
const WARM_MS = 300;
const MODEL = 'mlp';

export interface EfficiencyServerPoint {
  readonly kind: 'server';
  readonly reading: LeanReading;
  /** Rows the model executed over the windows (its statistics), per second and per CPU-second of the whole server process. */
  readonly rowsPerSecond: number;
  readonly rowsPerCpuSecond: number;
}

export interface EfficiencyInProcessPoint {
  readonly kind: 'in-process';
  readonly window: ReplayWindow;
}

export type EfficiencyPoint = EfficiencyServerPoint | EfficiencyInProcessPoint;

/**
 * `batching`'s in-process ratio (issue 30): the 4x2048 MLP with `batching`'s batching-on config
 * (delay DELAY_US, THREADS intra-op threads), HTTP binary through the lean client at
 * `concurrency` clients, against the same model in this process through ONNX Runtime with the
 * session options the server gives it, running the very batches the server formed. In the order
 * server, in-process, in-process, server (the in-process windows replay the first server
 * measurement's batches), so the machine's drift weighs on both sides alike; each ratio compares
 * the means. The server's CPU is its whole process (/proc/<pid>/stat), split per thread group
 * (bench/src/threads.ts); the in-process CPU is process.cpuUsage over its window.
 */
export async function runEfficiency(options: {
  model: BatchingModel;
  concurrency: number;
  windows: WindowOptions;
  /** Length of each in-process window. @default windows.windowMs * 3 */
  inProcessMs?: number;
  log: (line: string) => void;
  name?: string;
}) {
  const { model, log, concurrency } = options;
  const env = environment();
  const label = `mlp-${model.layers}x${model.width}`;
  const file = await cachedModel(label, () => mlp({ layers: model.layers, width: model.width }), log);
  const config = batchingConfig(MODEL, model, true);
  const repo = await benchRepository('efficiency', [{ name: MODEL, modelFile: file, config }]);
  const inProcessMs = options.inProcessMs ?? options.windows.windowMs * 3;
  const reference = await openInProcess({ file, width: model.width, config });
  const points: EfficiencyPoint[] = [];
  let threadsClassified = false;
  try {
    const server = await startServerProcess(['--model-repository', repo]);
    try {
      // A short load before anything is measured: ONNX Runtime's threads exist after it, and the
      // event loop that worked in it is the model's worker (bench/src/threads.ts).
      const warm = leanFp32Client(server.httpUrl, MODEL, model.width);
      const roles = await classifyThreads(server.child.pid!, async () => {
        const until = performance.now() + WARM_MS;
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            while (performance.now() < until) await warm.send();
          }),
        );
      });
      warm.close();
      threadsClassified = roles !== undefined;
      const measureServer = async (n: number): Promise<EfficiencyServerPoint> => {
        const client = leanFp32Client(server.httpUrl, MODEL, model.width);
        try {
          const reading = await measureLean(
            `server ${n} c=${concurrency}`,
            client,
            { concurrency },
            { ...options.windows, log },
            { pid: server.child.pid!, stats: { httpUrl: server.httpUrl, model: MODEL }, ...(roles && { threads: roles }) },
          );
          const rows = reading.server ? Math.round(reading.server.avgBatchSize * reading.server.executions) : 0;
          return {
            kind: 'server',
            reading,
            rowsPerSecond: reading.client.throughput,
            rowsPerCpuSecond: reading.serverCpuSeconds ? rows / reading.serverCpuSeconds : NaN,
          };
        } finally {
          client.close();
        }
      };
      const replay = async (batches: Readonly<Record<number, number>>, n: number): Promise<EfficiencyInProcessPoint> => {
        await sleep(SETTLE_MS);
        const window = await reference.replay(batches, inProcessMs, [process.pid, server.child.pid!]);
        log(
          `  in-process ${n}: ${window.rowsPerSecond.toFixed(0)} rows/s, ${window.rowsPerCpuSecond.toFixed(0)} rows per CPU-second ` +
            `(${window.runs} runs${window.cpu ? `; server ${window.cpu.pidCores[1]} cores, other ${window.cpu.otherCores}` : ''})`,
        );
        return { kind: 'in-process', window };
      };
      const first = await measureServer(1);
      points.push(first);
      const batches = first.reading.server?.batches ?? {};
      points.push(await replay(batches, 1));
      points.push(await replay(batches, 2));
      points.push(await measureServer(2));
    } finally {
      await server.stop();
    }
  } finally {
    await reference.release();
  }

  const servers = points.filter((p): p is EfficiencyServerPoint => p.kind === 'server');
  const inProcess = points.filter((p): p is EfficiencyInProcessPoint => p.kind === 'in-process').map((p) => p.window);
  const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const ratios = {
    rows_per_cpu_second_vs_in_process: mean(servers.map((s) => s.rowsPerCpuSecond)) / mean(inProcess.map((w) => w.rowsPerCpuSecond)),
    rows_per_second_vs_in_process: mean(servers.map((s) => s.rowsPerSecond)) / mean(inProcess.map((w) => w.rowsPerSecond)),
  };
  const checks: Check[] = [
    ratioCheck('rows_per_cpu_second_vs_in_process', ratios.rows_per_cpu_second_vs_in_process, { atLeast: ROWS_PER_CPU_SECOND_TARGET }),
    ratioCheck('rows_per_second_vs_in_process', ratios.rows_per_second_vs_in_process, { atLeast: ROWS_PER_SECOND_TARGET }),
  ];

  const headers = ['measurement', 'rows/s', 'rows per cpu-s', 'cores', 'avg batch', 'p50 ms', 'p99 ms', 'client cpu', 'other cpu'];
  const rows = points.map((p, i) =>
    p.kind === 'server'
      ? [
          `server (c=${concurrency})`,
          p.rowsPerSecond,
          p.rowsPerCpuSecond,
          p.reading.serverCores ?? '',
          p.reading.server?.avgBatchSize ?? '',
          p.reading.client.latencyMs.p50,
          p.reading.client.latencyMs.p99,
          p.reading.clientCores,
          p.reading.otherCores ?? '',
        ]
      : [
          `in-process ${i === 1 ? 1 : 2}`,
          p.window.rowsPerSecond,
          p.window.rowsPerCpuSecond,
          p.window.cpuMs / p.window.durationMs,
          p.window.rows / p.window.runs,
          '',
          '',
          '',
          p.window.cpu?.otherCores ?? '',
        ],
  );
  // Per thread group, for each server measurement: cores, and CPU per row executed (us); the in-process CPU per row beside them.
  const measured = servers.filter((s) => s.reading.threads);
  const threadHeaders = ['thread group', 'threads', ...measured.flatMap((_, i) => [`server ${i + 1} cores`, 'us cpu/row'])];
  const usPerRow = (cores: number, s: EfficiencyServerPoint) => (s.rowsPerSecond > 0 ? Math.round((cores * 1e6) / s.rowsPerSecond) : '');
  const threadRows: (string | number)[][] = [
    ...THREAD_GROUPS.map((g) => [
      g,
      measured[0]?.reading.threads![g].threads ?? '',
      ...measured.flatMap((s) => [s.reading.threads![g].cores, usPerRow(s.reading.threads![g].cores, s)]),
    ]),
    ['whole process', '', ...measured.flatMap((s) => [s.reading.serverCores ?? '', usPerRow(s.reading.serverCores ?? NaN, s)])],
    ['in-process (mean)', '', ...measured.flatMap(() => ['', Math.round(1e6 / mean(inProcess.map((w) => w.rowsPerCpuSecond)))])],
  ];
  const result = { model: label, concurrency, config, environment: env, points, ratios, checks };
  await reportScenario(
    {
      name: options.name ?? 'efficiency',
      title: `pnpm bench efficiency: ${label}, the server against the same model in-process`,
      intro:
        `HTTP binary, the lean client, ${concurrency} clients; the in-process windows run the batches the first server ` +
        `measurement formed, with the server's session options (${env['date']}).`,
      tables: [
        { headers, rows },
        ...(measured.length > 0 ? [{ caption: "The server's CPU by thread group", headers: threadHeaders, rows: threadRows }] : []),
      ],
      notes: threadsClassified ? [] : ["the server's threads could not be told apart (not Linux, or no event loop worked in the warm-up)"],
      checks,
      json: result,
    },
    log,
  );
  return result;
}
