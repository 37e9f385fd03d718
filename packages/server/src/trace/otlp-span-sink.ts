import {
  ROOT_CONTEXT,
  SpanStatusCode,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Context,
  type HrTime,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { Logger } from 'pino';
import type { TraceContext } from '../protocol/types.ts';
import type { OpenTelemetryConfig } from './trace-config-flags.ts';
import type { RequestSpan, RequestSpanStart, SpanSink, TimestampName, TraceTimestamp } from './tracer.ts';

/** The request span's name, as Triton names it. */
export const REQUEST_SPAN_NAME = 'InferRequest';

/** A request's phases as child spans, each between two of Triton's timestamps. */
export const PHASE_SPANS: readonly { name: string; from: TimestampName; to: TimestampName }[] = [
  { name: 'queue', from: 'QUEUE_START', to: 'COMPUTE_START' },
  { name: 'compute_input', from: 'COMPUTE_START', to: 'COMPUTE_INPUT_END' },
  { name: 'compute_infer', from: 'COMPUTE_INPUT_END', to: 'COMPUTE_OUTPUT_START' },
  { name: 'compute_output', from: 'COMPUTE_OUTPUT_START', to: 'COMPUTE_END' },
];

/**
 * Mode opentelemetry: request spans with their phases as child spans, exported over OTLP HTTP
 * (JSON) by a BatchSpanProcessor. Sampling is the Tracer's (rate, count, the caller's flag), so
 * the SDK samples everything it is given. Nothing is registered globally: each server has its own provider.
 */
export class OtlpSpanSink implements SpanSink {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;
  private readonly propagator = new W3CTraceContextPropagator();
  /** Epoch nanoseconds minus process.hrtime.bigint(): the timestamps are monotonic readings, spans want wall time. */
  private readonly epochOffsetNs: bigint;

  constructor(config: OpenTelemetryConfig, logger: Logger) {
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'batchwise', ...config.resource }),
      sampler: new AlwaysOnSampler(),
      spanProcessors: [
        new BatchSpanProcessor(new OTLPTraceExporter({ url: config.url }), {
          maxExportBatchSize: config.bspMaxExportBatchSize,
          scheduledDelayMillis: config.bspScheduleDelayMs,
          maxQueueSize: config.bspMaxQueueSize,
        }),
      ],
    });
    this.tracer = this.provider.getTracer('batchwise');
    this.epochOffsetNs = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6)) - process.hrtime.bigint();
    logger.info({ url: config.url }, 'trace mode opentelemetry: exporting spans over OTLP HTTP');
  }

  start({ traceId, model, version, requestId, startNs, parent }: RequestSpanStart): RequestSpan {
    const parentContext = parent ? this.propagator.extract(ROOT_CONTEXT, { ...parent }, defaultTextMapGetter) : ROOT_CONTEXT;
    const span = this.tracer.startSpan(
      REQUEST_SPAN_NAME,
      {
        startTime: this.hrTime(startNs),
        attributes: {
          'triton.model_name': model,
          'triton.model_version': version,
          'triton.trace_id': traceId,
          ...(requestId !== undefined && { 'triton.request_id': requestId }),
        },
      },
      parentContext,
    );
    const spanContext = trace.setSpan(ROOT_CONTEXT, span);
    return {
      context: this.contextOf(spanContext),
      end: (timestamps, endNs, error) => this.end(span, spanContext, timestamps, endNs, error),
    };
  }

  async close(): Promise<void> {
    await this.provider.shutdown();
  }

  private end(span: Span, parent: Context, timestamps: readonly TraceTimestamp[], endNs: bigint, error: unknown): void {
    const at = new Map(timestamps.map((t) => [t.name, t.ns]));
    for (const { name, ns } of timestamps) span.addEvent(name, this.hrTime(ns));
    for (const phase of PHASE_SPANS) {
      const from = at.get(phase.from);
      const to = at.get(phase.to);
      if (from === undefined || to === undefined) continue;
      this.tracer.startSpan(phase.name, { startTime: this.hrTime(from) }, parent).end(this.hrTime(to));
    }
    if (error !== undefined)
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    span.end(this.hrTime(endNs));
  }

  private contextOf(context: Context): TraceContext {
    const carrier: Record<string, string> = {};
    this.propagator.inject(context, carrier, defaultTextMapSetter);
    return { traceparent: carrier.traceparent!, ...(carrier.tracestate !== undefined && { tracestate: carrier.tracestate }) };
  }

  private hrTime(monotonicNs: bigint): HrTime {
    const ns = monotonicNs + this.epochOffsetNs;
    return [Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n)];
  }
}
