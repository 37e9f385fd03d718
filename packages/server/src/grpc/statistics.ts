import type { ModelStatistics } from '../core/index.ts';
import type { ModelStatisticsWire } from './wire-types.ts';

/** Triton's JSON statistics -> the proto ModelStatistics (same field names). */
export function toModelStatisticsWire(s: ModelStatistics): ModelStatisticsWire {
  return {
    name: s.name,
    version: s.version,
    last_inference: s.last_inference,
    inference_count: s.inference_count,
    execution_count: s.execution_count,
    inference_stats: { ...s.inference_stats },
    batch_stats: s.batch_stats.map((b) => ({ ...b })),
    memory_usage: s.memory_usage.filter(isMemoryUsage).map((m) => ({
      type: String(m.type ?? ''),
      id: Number(m.id ?? 0),
      byte_size: Number(m.byte_size ?? 0),
    })),
  };
}

function isMemoryUsage(m: unknown): m is { type?: unknown; id?: unknown; byte_size?: unknown } {
  return typeof m === 'object' && m !== null;
}
