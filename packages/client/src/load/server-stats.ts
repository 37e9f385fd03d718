import type { ModelStatistics } from '@batchwise/protocol';

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

/** What the breakdown reads of a model's statistics (a `ModelStatistics` is one). */
export interface StatsSnapshot {
  readonly inference_count: number;
  readonly execution_count: number;
  readonly inference_stats: {
    readonly success: { readonly count: number; readonly ns: number };
    readonly queue: { readonly ns: number };
    readonly compute_infer: { readonly ns: number };
  };
  readonly batch_stats: readonly { readonly batch_size: number; readonly compute_infer: { readonly count: number } }[];
}

/**
 * A model's statistics (Triton's statistics extension, `GET /v2/models/<model>/stats`): its first
 * version's. Fetched on a connection of its own, so a reading taken under load does not wait
 * behind the generator's requests.
 */
export async function readStats(httpUrl: string, model: string): Promise<ModelStatistics> {
  const response = await fetch(`${httpUrl}/v2/models/${encodeURIComponent(model)}/stats`);
  if (!response.ok) throw new Error(`statistics of '${model}': HTTP ${response.status} ${await response.text()}`);
  const body = (await response.json()) as { model_stats: ModelStatistics[] };
  return body.model_stats[0]!;
}

/** What the server did between two readings of the same model's statistics: means per successful request. */
export function breakdown(before: StatsSnapshot, after: StatsSnapshot): ServerBreakdown {
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
