import type { LatencyObjectiveStatistics } from '../protocol/types.ts';
import { HistogramData } from './collected-histogram.ts';

/** Triton's reasons for nv_inference_request_failure; every one is exported (at 0) once a version loads. */
export const FAILURE_REASONS = ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER'] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/** Where a request was refused for the latency objective: on arrival, or later while queued. */
export const OBJECTIVE_SHED_REASONS = ['admission', 'queued'] as const;
export type ObjectiveShedReason = (typeof OBJECTIVE_SHED_REASONS)[number];

/** A sequence batcher's figures (scheduler/sequence/), read when scraped. */
export interface SequenceFigures {
  /** Sequences holding a slot or waiting in the backlog. */
  readonly active: number;
  /** Sequences waiting in the backlog for a slot. */
  readonly backlog: number;
  readonly slotsInUse: number;
  readonly slots: number;
  /** Sequences whose slot max_sequence_idle_microseconds freed, since this load. */
  readonly idleReleases: number;
  /** Bytes the sequences' implicit states hold, charged to the memory guard. */
  readonly stateBytes: number;
}

/**
 * The Prometheus series of one model version, as plain numbers that the request path adds
 * to; ServerMetrics publishes them when scraped. Recording a request is then a few
 * additions, where prom-client hashed and validated the label object on each of about ten
 * metric calls. There is one per model and version for the life of the server, shared by
 * every load of that version, so counters stay cumulative across reloads.
 */
export class VersionSeries {
  readonly labels: Readonly<{ model: string; version: string }>;
  success = 0;
  readonly failures: Record<FailureReason, number> = { REJECTED: 0, CANCELED: 0, BACKEND: 0, OTHER: 0 };
  /** Samples inferred. */
  inferences = 0;
  executions = 0;
  /** Durations summed in nanoseconds; exported in whole microseconds, as Triton's integer *_duration_us counters. */
  requestNs = 0;
  queueNs = 0;
  computeInputNs = 0;
  computeInferNs = 0;
  computeOutputNs = 0;
  cacheHits = 0;
  cacheHitNs = 0;
  cacheMisses = 0;
  cacheMissNs = 0;
  gpuOutOfMemory = 0;
  /** Batches that went through the rate limiter, and the time they waited for its grant. */
  rateLimiterGrants = 0;
  rateLimiterWaitNs = 0;
  /** Requests queued and not yet executing (Triton's nv_inference_pending_request_count). */
  pending = 0;
  /** Latency objective (batchwise_latency_objective_ms): what the batcher decided, read when scraped; undefined without one. */
  latencyObjective: (() => LatencyObjectiveStatistics) | undefined;
  /** The sequence batcher's figures, for a version with sequence_batching; undefined otherwise. */
  sequences: (() => SequenceFigures) | undefined;
  /** Idle releases of earlier loads of the version (counters stay cumulative across reloads). */
  idleReleasesBefore = 0;
  /** Requests refused because they would miss the latency objective, by where they were refused. */
  readonly objectiveShed: Record<ObjectiveShedReason, number> = { admission: 0, queued: 0 };
  readonly requestSeconds: HistogramData;
  readonly queueSeconds: HistogramData;
  readonly computeSeconds: HistogramData;
  readonly batchSize: HistogramData;
  readonly rateLimiterWaitSeconds: HistogramData;

  constructor(
    model: string,
    version: string,
    buckets: { readonly latencySeconds: readonly number[]; readonly batchSize: readonly number[] },
  ) {
    this.labels = { model, version };
    this.requestSeconds = new HistogramData(buckets.latencySeconds);
    this.queueSeconds = new HistogramData(buckets.latencySeconds);
    this.computeSeconds = new HistogramData(buckets.latencySeconds);
    this.batchSize = new HistogramData(buckets.batchSize);
    this.rateLimiterWaitSeconds = new HistogramData(buckets.latencySeconds);
  }
}

/** Nanoseconds as the whole microseconds a *_duration_us counter shows: the rest carries to the next addition. */
export function wholeMicroseconds(ns: number): number {
  return Math.floor(ns / 1000);
}
