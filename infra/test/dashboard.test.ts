import { describe, expect, it } from 'vitest';
import { IMAGE_URI, REQUIRED, memo, only, synth } from './synth.ts';
import { SERVER_METRICS } from '../lib/server-metrics.ts';

const defaults = memo(() => synth({ ...REQUIRED, imageUri: IMAGE_URI }));

interface Widget {
  readonly type: string;
  readonly properties: { readonly title: string; readonly metrics?: unknown[][] };
}

/** The dashboard body as CloudWatch reads it, with CloudFormation references replaced by `<ref>`. */
const widgets = memo((): Widget[] => {
  const body = only(defaults().template, 'AWS::CloudWatch::Dashboard').props.DashboardBody;
  const parts: unknown[] = typeof body === 'string' ? [body] : body['Fn::Join'][1];
  const text = parts.map((p) => (typeof p === 'string' ? p : '<ref>')).join('');
  return JSON.parse(text).widgets;
});

const widget = (title: string): Widget => {
  const found = widgets().find((w) => w.properties.title === title);
  if (!found) throw new Error(`no widget "${title}" in ${widgets().map((w) => w.properties.title)}`);
  return found;
};

/** Each graphed server metric of a widget as `Name statistic`, and its SEARCH expressions. */
const lines = (title: string): string[] =>
  (widget(title).properties.metrics ?? []).map((row) => {
    const options = row.at(-1) as { expression?: string; stat?: string };
    if (options.expression) return options.expression;
    return `${row[1]} ${options.stat ?? ''}`.trim();
  });

describe('CloudWatch dashboard: the Grafana panels from EMF', () => {
  it('draws request rate, in total and per model', () => {
    const graphed = lines('Request rate (requests per minute, per model)');
    expect(graphed[0]).toBe('RequestCount Sum');
    expect(graphed[1]).toMatch(/^SEARCH\('\{Batchwise,ServiceName,Model\} MetricName="RequestCount" ServiceName="[^"]+"', 'Sum', 60\)$/);
  });

  it('draws failures by reason', () => {
    expect(lines('Failures by reason (per minute)')).toEqual([
      'RequestFailures Sum',
      'BackendFailures Sum',
      'QueueRejections Sum',
      'MemoryRejections Sum',
    ]);
  });

  it('draws p50 and p99 of request, queue and compute time, and per-model p99', () => {
    for (const [title, name] of [
      ['Request latency p50 / p99 (ms; ALB p99 in s)', 'RequestLatency'],
      ['Queue time p50 / p99 (ms)', 'QueueLatency'],
      ['Compute time per batch p50 / p99 (ms)', 'ComputeLatency'],
    ] as const) {
      const graphed = lines(title);
      expect(graphed.slice(0, 2)).toEqual([`${name} p50`, `${name} p99`]);
      expect(graphed[2]).toContain(`MetricName="${name}"`);
      expect(graphed[2]).toContain(`'p99', 60)`);
    }
  });

  it('draws batch size, host memory against its budget, GPU utilization and memory, failed model loads', () => {
    expect(lines('Batch size p50 / p99 / max (bucket upper bounds)')).toEqual(['BatchSize p50', 'BatchSize p99', 'BatchSize Maximum']);
    expect(lines('Host memory: server accounting vs budget (bytes)')).toEqual([
      'MemoryAccountedBytes Maximum',
      'MemoryBudgetBytes Maximum',
    ]);
    expect(lines('GPU utilization (%, busiest task)')).toEqual(['GpuUtilization Maximum']);
    expect(lines('GPU memory used (bytes)')).toEqual(['GpuMemoryUsedBytes Maximum']);
    expect(lines('Models with a failed load')[0]).toBe('ModelsFailedToLoad Maximum');
  });

  it('draws active sequences and the backlog, of the fullest task and per model (issue 28)', () => {
    const graphed = lines('Sequences active and in the backlog (fullest task, per model)');
    expect(graphed[0]).toBe('SequencesActive Maximum');
    expect(graphed[1]).toMatch(
      /^SEARCH\('\{Batchwise,ServiceName,Model\} MetricName="SequencesActive" ServiceName="[^"]+"', 'Maximum', 60\)$/,
    );
    expect(graphed[2]).toBe('SequenceBacklog Maximum');
    expect(graphed[3]).toContain('MetricName="SequenceBacklog"');
  });

  it('graphs every metric of the EMF contract somewhere', () => {
    const graphed = widgets().flatMap((w) => (w.properties.metrics ?? []).map((row) => String(row[1])));
    for (const spec of Object.values(SERVER_METRICS)) expect(graphed, spec.name).toContain(spec.name);
  });
});
