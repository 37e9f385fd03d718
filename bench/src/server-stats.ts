/** The server-side breakdown, from the statistics extension, over a measurement. */
export interface ServerBreakdown {
  readonly requests: number;
  readonly executions: number;
  readonly avgBatchSize: number;
  /** A successful request's time in the server, from decoded to answered (inference_stats.success). */
  readonly avgRequestMs: number;
  readonly avgQueueMs: number;
  readonly avgComputeInferMs: number;
  /** Executions per batch size over the measurement. */
  readonly batches: Record<number, number>;
}

interface RawStats {
  inference_count: number;
  execution_count: number;
  inference_stats: {
    success: { count: number; ns: number };
    queue: { ns: number; count: number };
    compute_infer: { ns: number; count: number };
  };
  batch_stats: { batch_size: number; compute_infer: { count: number } }[];
}

export async function readStats(httpUrl: string, model: string): Promise<RawStats> {
  const body = (await (await fetch(`${httpUrl}/v2/models/${model}/stats`)).json()) as { model_stats: RawStats[] };
  return body.model_stats[0]!;
}

export function breakdown(before: RawStats, after: RawStats): ServerBreakdown {
  const requests = after.inference_stats.success.count - before.inference_stats.success.count;
  const executions = after.execution_count - before.execution_count;
  const inferences = after.inference_count - before.inference_count;
  const batches: Record<number, number> = {};
  for (const b of after.batch_stats) {
    const prior = before.batch_stats.find((x) => x.batch_size === b.batch_size)?.compute_infer.count ?? 0;
    if (b.compute_infer.count > prior) batches[b.batch_size] = b.compute_infer.count - prior;
  }
  const per = (a: { ns: number }, b: { ns: number }) => (requests > 0 ? (a.ns - b.ns) / requests / 1e6 : 0);
  return {
    requests,
    executions,
    avgBatchSize: executions > 0 ? inferences / executions : 0,
    avgRequestMs: per(after.inference_stats.success, before.inference_stats.success),
    avgQueueMs: per(after.inference_stats.queue, before.inference_stats.queue),
    avgComputeInferMs: per(after.inference_stats.compute_infer, before.inference_stats.compute_infer),
    batches,
  };
}
