import { writeFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { ExecutionTimings } from '../backends/backend.ts';
import type { TraceContext } from '../protocol/types.ts';
import { Errors, toInferenceServerError } from '../errors/errors.ts';
import { DEFAULT_TRACE_SETTINGS, type TraceSettingName, type TraceSettings, type TraceSettingsUpdate } from './trace-settings.ts';

/** Triton's timestamp names, in the order a request passes them. */
export type TimestampName =
  'REQUEST_START' | 'QUEUE_START' | 'COMPUTE_START' | 'COMPUTE_INPUT_END' | 'COMPUTE_OUTPUT_START' | 'COMPUTE_END' | 'REQUEST_END';

/** One traced request: timestamps are process.hrtime.bigint() readings (a monotonic clock, as Triton's). */
export interface RequestTrace {
  /** The trace's id in the trace file; an ensemble step's trace names it as its parent_id. */
  readonly id: number;
  /** Mode opentelemetry: the request span's W3C context (an ensemble step's parent, the response's traceparent). */
  readonly context?: TraceContext;
  mark(name: TimestampName, ns: bigint): void;
  /** Ends the trace: it is kept for the trace file, or its spans are exported; `error` marks a failed request. */
  end(error?: unknown): void;
}

/** A recorded timestamp of a request. */
export interface TraceTimestamp {
  readonly name: TimestampName;
  readonly ns: bigint;
}

/** What a request span is started with (mode opentelemetry). */
export interface RequestSpanStart {
  readonly traceId: number;
  readonly model: string;
  readonly version: string;
  readonly requestId: string | undefined;
  readonly startNs: bigint;
  /** The caller's context, or the ensemble request's span. */
  readonly parent: TraceContext | undefined;
}

/** A started request span: ended with every timestamp the request passed (its child spans come from them). */
export interface RequestSpan {
  readonly context: TraceContext;
  end(timestamps: readonly TraceTimestamp[], endNs: bigint, error?: unknown): void;
}

/**
 * Where spans go in mode opentelemetry (otlp-span-sink.ts, loaded only in that mode so that the
 * OpenTelemetry SDK is not even imported otherwise).
 */
export interface SpanSink {
  start(span: RequestSpanStart): RequestSpan;
  close(): Promise<void>;
}

/** W3C traceparent's trace-flags say the caller sampled (recorded) its span. */
export function isSampled(context: TraceContext): boolean {
  const flags = /^[\da-f]{2}-[\da-f]{32}-[\da-f]{16}-([\da-f]{2})$/.exec(context.traceparent.trim().toLowerCase())?.[1];
  return flags !== undefined && (parseInt(flags, 16) & 1) === 1;
}

/** The compute timestamps of a request from its batch's dispatch time and the instance's timings. */
export function markCompute(trace: RequestTrace, dispatchedNs: bigint, timings: ExecutionTimings): void {
  const inputEnd = dispatchedNs + BigInt(timings.computeInputNs);
  const outputStart = inputEnd + BigInt(timings.computeInferNs);
  trace.mark('COMPUTE_START', dispatchedNs);
  trace.mark('COMPUTE_INPUT_END', inputEnd);
  trace.mark('COMPUTE_OUTPUT_START', outputStart);
  trace.mark('COMPUTE_END', outputStart + BigInt(timings.computeOutputNs));
}

/** Traces held in memory at most (a few MB) before they are written, whatever log_frequency says. */
export const MAX_HELD_TRACES = 10_000;

interface TraceRecord {
  id: number;
  model_name: string;
  model_version: number;
  request_id: string;
  /** Set on the trace of an ensemble step: the id of the ensemble request's trace (Triton's parent_id). */
  parent_id?: number;
  timestamps: { name: TimestampName; ns: number }[];
  /** Batchwise's: how a request that failed ended (a cancellation: code CANCELLED); Triton's trace file has no such field. */
  error?: { code: string; message: string };
}

/**
 * Triton's trace extension: global settings, optional per-model overrides, sampling of one
 * request in `trace_rate`, and the trace file (a JSON array in Triton's format, which
 * Triton's trace_summary.py reads).
 */
export class Tracer {
  private global: TraceSettings;
  private readonly perModel = new Map<string, TraceSettingsUpdate>();
  /** Requests seen and traces left, per model (each model samples on its own). */
  private readonly counters = new Map<string, { seen: number; left: number }>();
  private collected: TraceRecord[] = [];
  private nextId = 1;
  private fileIndex = 0;
  private writes: Promise<void> = Promise.resolve();

  constructor(
    initial: Partial<TraceSettings>,
    private readonly logger: Logger,
    /** Required in mode opentelemetry. */
    private readonly spans?: SpanSink,
  ) {
    this.global = { ...DEFAULT_TRACE_SETTINGS, ...initial };
    if (this.global.trace_mode === 'opentelemetry' && !spans) throw new Error('trace mode opentelemetry needs a span sink');
  }

  settings(model?: string): TraceSettings {
    const own = model === undefined ? undefined : this.perModel.get(model);
    if (!own) return this.global;
    const merged: Record<string, unknown> = { ...this.global };
    for (const [key, value] of Object.entries(own)) if (value !== undefined) merged[key] = value;
    return merged as unknown as TraceSettings;
  }

  /** Applies an update globally or to one model; a cleared model setting follows the global one again. */
  update(update: TraceSettingsUpdate, model?: string): TraceSettings {
    if (update.trace_mode !== undefined && update.trace_mode !== this.global.trace_mode) {
      throw Errors.unsupported(
        `trace_mode is '${this.global.trace_mode}' and cannot be changed while the server runs (--trace-config mode=...)`,
      );
    }
    if (model === undefined) {
      const next: Record<string, unknown> = { ...this.global };
      for (const [key, value] of Object.entries(update)) {
        next[key] = value === undefined ? DEFAULT_TRACE_SETTINGS[key as TraceSettingName] : value;
      }
      this.global = next as unknown as TraceSettings;
      this.counters.clear();
    } else {
      const own = { ...this.perModel.get(model), ...update };
      for (const key of Object.keys(own) as TraceSettingName[]) if (own[key] === undefined) delete own[key];
      this.perModel.set(model, own);
      this.counters.delete(model);
    }
    return this.settings(model);
  }

  /**
   * A trace for this request when sampling picks it, else undefined (the common case costs a
   * counter). The steps of a traced ensemble request (`parentId`) are always traced, as in
   * Triton, whatever their own model's sampling says. In mode opentelemetry a caller's sampled
   * `traceparent` is traced whatever the rate says (parent-based sampling), an unsampled one is not.
   */
  start(
    model: string,
    version: string,
    requestId: string | undefined,
    parentId?: number,
    context?: TraceContext,
    startNs: bigint = process.hrtime.bigint(),
  ): RequestTrace | undefined {
    const settings = this.settings(model);
    if (parentId === undefined) {
      if (!settings.trace_level.includes('TIMESTAMPS')) return undefined;
      let counter = this.counters.get(model);
      if (!counter) {
        counter = { seen: 0, left: settings.trace_count };
        this.counters.set(model, counter);
      }
      const byParent = context !== undefined && settings.trace_mode === 'opentelemetry' ? isSampled(context) : undefined;
      if (byParent === false) return undefined;
      if (counter.left === 0 || (counter.seen++ % settings.trace_rate !== 0 && byParent !== true)) return undefined;
      if (counter.left > 0) counter.left--;
    }
    const id = this.nextId++;
    if (this.global.trace_mode === 'opentelemetry') return this.startSpan(id, model, version, requestId, context, startNs);
    const record: TraceRecord = {
      id,
      model_name: model,
      model_version: Number(version),
      request_id: requestId ?? '',
      ...(parentId !== undefined && { parent_id: parentId }),
      timestamps: [],
    };
    return {
      id: record.id,
      mark: (name, ns) => void record.timestamps.push({ name, ns: Number(ns) }),
      end: (error) => {
        if (error !== undefined) {
          const { code, message } = toInferenceServerError(error);
          record.error = { code, message };
        }
        this.collect(record, settings);
      },
    };
  }

  private startSpan(
    id: number,
    model: string,
    version: string,
    requestId: string | undefined,
    parent: TraceContext | undefined,
    startNs: bigint,
  ): RequestTrace {
    const span = this.spans!.start({ traceId: id, model, version, requestId, startNs, parent });
    const timestamps: TraceTimestamp[] = [];
    return {
      id,
      context: span.context,
      mark: (name, ns) => void timestamps.push({ name, ns }),
      end: (error) => span.end(timestamps, timestamps.find((t) => t.name === 'REQUEST_END')?.ns ?? process.hrtime.bigint(), error),
    };
  }

  /** Writes what is still collected (shutdown). */
  async close(): Promise<void> {
    this.flush(this.global.log_frequency > 0);
    await Promise.all([this.writes, this.spans?.close()]);
  }

  private collect(record: TraceRecord, settings: TraceSettings): void {
    this.collected.push(record);
    if (settings.log_frequency > 0 && this.collected.length >= settings.log_frequency) this.flush(true);
    else if (this.collected.length >= MAX_HELD_TRACES) {
      // Triton would hold every trace until shutdown; memory must stay bounded, so write them now.
      this.logger.warn(
        { traces: this.collected.length },
        'trace log_frequency is 0 but many traces are held: writing them to a numbered trace file',
      );
      this.flush(true);
    }
  }

  /** Triton's layout: with a log frequency, numbered files `<trace_file>.<n>`; without, one file at shutdown. */
  private flush(numbered: boolean): void {
    const file = this.global.trace_file;
    if (this.collected.length === 0) return;
    if (file === '') {
      this.logger.warn(
        { traces: this.collected.length },
        'traces collected but no trace file is set (--trace-config file=<path>); dropping them',
      );
      this.collected = [];
      return;
    }
    const path = numbered ? `${file}.${this.fileIndex++}` : file;
    const traces = this.collected;
    this.collected = [];
    this.writes = this.writes.then(() =>
      writeFile(path, JSON.stringify(traces)).then(
        () => this.logger.info({ path, traces: traces.length }, 'trace file written'),
        (error: unknown) => this.logger.error({ path, err: error }, 'cannot write the trace file'),
      ),
    );
  }
}
