import { HttpClient } from '@batchwise/client';
import { summarize } from '@batchwise/client/load';
import { recurrentCell } from '@batchwise/modelgen';
import { startServerProcess, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { environment, reportScenario } from '../report.ts';
import { breakdown, readStats, type ServerBreakdown } from '../server-stats.ts';
import { benchRepository, cachedModel } from '../workload.ts';

/** The load: 64 sequences of 20 steps at a time, each step sent once the previous one is answered. */
export const SEQUENCES = { clients: 64, steps: 20, width: 1024 } as const;

const STRATEGIES = {
  direct: 'direct { }',
  oldest: 'oldest { max_candidate_sequences: 64 max_queue_delay_microseconds: 1000 }',
} as const;
type Strategy = keyof typeof STRATEGIES;

const config = (name: string, strategy: Strategy, width: number, slots: number) => `name: "${name}"
max_batch_size: ${slots}
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ ${width} ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ ${width} ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  ${STRATEGIES[strategy]}
  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ ${width} ]
    initial_state: { name: "zeros" data_type: TYPE_FP32 dims: [ ${width} ] zero_data: true } } ]
}
instance_group [ { kind: KIND_CPU count: 1 } ]
`;

export interface SequencesRun {
  readonly strategy: Strategy;
  readonly requests: number;
  readonly errors: number;
  readonly firstError?: string;
  readonly seconds: number;
  readonly throughput: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly server: ServerBreakdown;
  /** Rows per execution, null requests included (direct pads the slots between ready ones). */
  readonly rowsPerExecution: number;
}

/**
 * `pnpm bench sequences`: a recurrent cell (2 x MatMul 1024, its state kept by the server) served with
 * the direct and the oldest strategy, `clients` concurrent sequences of `steps` steps each, `rounds`
 * sequences per client, over HTTP binary; each strategy measured twice (direct, oldest, oldest,
 * direct) against drift. Throughput, p50/p99 of a step, and the mean batch (requests per execution,
 * from the server's statistics).
 */
export async function runSequences(options: {
  clients: number;
  steps: number;
  rounds: number;
  width: number;
  log: (line: string) => void;
  name?: string;
}): Promise<SequencesRun[]> {
  const { clients, steps, rounds, width, log } = options;
  const modelFile = await cachedModel(`recurrent_2x${width}`, () => recurrentCell(width), log);
  const repo = await benchRepository('sequences', [
    { name: 'seq_direct', config: config('seq_direct', 'direct', width, clients), modelFile },
    { name: 'seq_oldest', config: config('seq_oldest', 'oldest', width, clients), modelFile },
  ]);
  const server = await startServerProcess(['--model-repository', repo, '--shutdown-grace-secs', '0']);
  const runs: SequencesRun[] = [];
  try {
    let round = 0;
    // Both models warmed up first (the first measurement ran at half speed otherwise), then A B B A, fresh ids each time.
    for (const strategy of ['direct', 'oldest'] as const) {
      await drive(server, `seq_${strategy}`, { clients, steps, rounds, width, firstId: ++round * 1_000_000 });
    }
    for (const strategy of ['direct', 'oldest', 'oldest', 'direct'] as const) {
      const before = await readStats(server.httpUrl, `seq_${strategy}`);
      const measured = await drive(server, `seq_${strategy}`, { clients, steps, rounds, width, firstId: ++round * 1_000_000 });
      const after = await readStats(server.httpUrl, `seq_${strategy}`);
      const rows =
        after.batch_stats.reduce((n, b) => n + b.batch_size * b.compute_infer.count, 0) -
        before.batch_stats.reduce((n, b) => n + b.batch_size * b.compute_infer.count, 0);
      const server_ = breakdown(before, after);
      const latency = summarize(measured.latenciesMs);
      const run: SequencesRun = {
        strategy,
        requests: measured.latenciesMs.length,
        errors: measured.errors,
        ...(measured.firstError !== undefined && { firstError: measured.firstError }),
        seconds: measured.seconds,
        throughput: measured.latenciesMs.length / measured.seconds,
        p50Ms: latency.p50,
        p99Ms: latency.p99,
        server: server_,
        rowsPerExecution: server_.executions > 0 ? rows / server_.executions : 0,
      };
      runs.push(run);
      log(
        `${strategy}: ${run.throughput.toFixed(0)} requests/s, p50 ${run.p50Ms.toFixed(2)} ms, p99 ${run.p99Ms.toFixed(2)} ms, ` +
          `mean batch ${run.server.avgBatchSize.toFixed(1)} (${run.rowsPerExecution.toFixed(1)} rows), ${run.errors} errors`,
      );
    }
  } finally {
    await server.stop();
  }
  const mean = (strategy: Strategy, pick: (r: SequencesRun) => number) => {
    const of = runs.filter((r) => r.strategy === strategy);
    return of.reduce((n, r) => n + pick(r), 0) / of.length;
  };
  const rows = (['direct', 'oldest'] as const).map((s) => [
    s,
    mean(s, (r) => r.throughput),
    mean(s, (r) => r.p50Ms),
    mean(s, (r) => r.p99Ms),
    mean(s, (r) => r.server.avgBatchSize),
    mean(s, (r) => r.rowsPerExecution),
    mean(s, (r) => r.errors),
  ]);
  await reportScenario(
    {
      name: options.name ?? 'sequences',
      title: 'Sequences: direct against oldest',
      intro:
        `${clients} interleaved sequences of ${steps} steps (${rounds} per client), each step sent when the previous one is answered, ` +
        `over HTTP binary, to a recurrent cell (2 x MatMul ${width}, Tanh) whose state the server keeps (implicit state); ` +
        `each strategy measured twice (direct, oldest, oldest, direct), means shown.`,
      tables: [
        {
          headers: ['strategy', 'requests/s', 'p50 ms', 'p99 ms', 'mean batch', 'rows per execution', 'errors'],
          rows,
        },
      ],
      notes: [`direct over oldest, throughput: ${(mean('direct', (r) => r.throughput) / mean('oldest', (r) => r.throughput)).toFixed(2)}`],
      checks: [
        {
          target: 'every request answered',
          pass: runs.every((r) => r.errors === 0),
          detail: runs.map((r) => `${r.strategy} ${r.errors}`).join(', '),
        },
      ],
      json: { environment: environment(), clients, steps, rounds, width, runs },
    },
    log,
  );
  return runs;
}

/** `clients` closed loops, each running `rounds` sequences of `steps` steps; the latency of every step. */
async function drive(
  server: ServerProcess,
  model: string,
  o: { clients: number; steps: number; rounds: number; width: number; firstId: number },
): Promise<{ latenciesMs: number[]; errors: number; firstError?: string; seconds: number }> {
  const client = new HttpClient({ url: server.httpUrl, connections: o.clients });
  const latenciesMs: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const input = new Float32Array(o.width).fill(0.01);
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: o.clients }, async (_, c) => {
        for (let r = 0; r < o.rounds; r++) {
          const id = o.firstId + c * o.rounds + r;
          for (let step = 0; step < o.steps; step++) {
            const t0 = performance.now();
            try {
              await client.infer({
                model,
                inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, o.width], data: input }],
                parameters: { sequence_id: id, sequence_start: step === 0, sequence_end: step === o.steps - 1 },
              });
              latenciesMs.push(performance.now() - t0);
            } catch (error) {
              errors++;
              firstError ??= (error as Error).message;
            }
          }
        }
      }),
    );
  } finally {
    await client.close();
  }
  return { latenciesMs, errors, ...(firstError !== undefined && { firstError }), seconds: (performance.now() - started) / 1000 };
}
