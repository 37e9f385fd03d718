/**
 * Per-execution times read from the server's statistics (Triton's statistics extension,
 * `GET /v2/models/<model>/stats`): `batch_stats` holds, per batch size, how many executions ran
 * (`compute_infer.count`) and their summed durations, so one execution's time is `ns / count`
 * exactly. (`inference_stats.compute_infer` is summed per request, a batch of 8 adding its
 * duration 8 times: divided by `execution_count` it overstates an execution by the batch size.)
 */
import type { ModelStatistics } from '@batchwise/client';

/** Executions of one batch size between two readings of a model's statistics, and one execution's mean phases. */
export interface ExecutionTimes {
  readonly batchSize: number;
  readonly executions: number;
  /** compute_input: the input tensors made ready for the run (for ONNX Runtime: feeds built). */
  readonly inputMs: number;
  /** compute_infer: the run itself (for WebGPU: uploads, kernels and read-backs inside session.run). */
  readonly inferMs: number;
  /** compute_output: the outputs taken from the run. */
  readonly outputMs: number;
}

type BatchStat = ModelStatistics['batch_stats'][number];
const ZERO = { count: 0, ns: 0 };

/** Per batch size, the executions that ran after `before` (from the load when it is undefined) up to `after`. */
export function executionTimes(after: ModelStatistics, before?: ModelStatistics): ExecutionTimes[] {
  const prior = new Map<number, BatchStat>((before?.batch_stats ?? []).map((b) => [b.batch_size, b]));
  const rows: ExecutionTimes[] = [];
  for (const b of after.batch_stats) {
    const p = prior.get(b.batch_size);
    const executions = b.compute_infer.count - (p?.compute_infer.count ?? 0);
    if (executions <= 0) continue;
    const per = (now: { ns: number }, then: { ns: number } = ZERO) => (now.ns - then.ns) / executions / 1e6;
    rows.push({
      batchSize: b.batch_size,
      executions,
      inputMs: per(b.compute_input, p?.compute_input),
      inferMs: per(b.compute_infer, p?.compute_infer),
      outputMs: per(b.compute_output, p?.compute_output),
    });
  }
  return rows.sort((x, y) => x.batchSize - y.batchSize);
}

/** One line of a model's executions: how many, the mean batch, and one execution's compute_infer at batch 1, the commonest and the largest size. */
export interface ExecutionSummary {
  readonly executions: number;
  readonly meanBatch: number;
  /** compute_infer of one execution over every batch size. */
  readonly meanInferMs: number;
  readonly batchOne?: ExecutionTimes;
  readonly commonest?: ExecutionTimes;
  readonly largest?: ExecutionTimes;
}

export function summarizeExecutions(rows: readonly ExecutionTimes[]): ExecutionSummary {
  const executions = rows.reduce((n, r) => n + r.executions, 0);
  const samples = rows.reduce((n, r) => n + r.executions * r.batchSize, 0);
  const inferMs = rows.reduce((n, r) => n + r.executions * r.inferMs, 0);
  const commonest = [...rows].sort((a, b) => b.executions - a.executions)[0];
  return {
    executions,
    meanBatch: executions ? samples / executions : 0,
    meanInferMs: executions ? inferMs / executions : 0,
    ...(rows.find((r) => r.batchSize === 1) && { batchOne: rows.find((r) => r.batchSize === 1)! }),
    ...(commonest && { commonest }),
    ...(rows.length > 0 && { largest: rows.at(-1)! }),
  };
}

const ms = (value: number | undefined) => (value === undefined ? '-' : value.toFixed(3));
const at = (t: ExecutionTimes | undefined) => (t ? `${ms(t.inferMs)} (batch ${t.batchSize}, ${t.executions}x)` : '-');

/** A markdown table, one row a model, of what summarizeExecutions says. */
export function executionTable(models: readonly { readonly model: string; readonly rows: readonly ExecutionTimes[] }[]): string[] {
  const lines = [
    '| model | executions | mean batch | compute_infer ms an execution | at batch 1 | at the commonest batch | at the largest batch | compute_input + compute_output ms at batch 1 |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const { model, rows } of models) {
    const s = summarizeExecutions(rows);
    const one = s.batchOne;
    lines.push(
      `| ${model} | ${s.executions} | ${s.meanBatch.toFixed(1)} | ${ms(s.executions ? s.meanInferMs : undefined)} | ${at(one)} | ${at(s.commonest)} | ${at(s.largest)} | ${one ? `${ms(one.inputMs)} + ${ms(one.outputMs)}` : '-'} |`,
    );
  }
  return lines;
}
