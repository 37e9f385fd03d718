/*
 * Reading the server's own /metrics text back: `batchwise models canary` judges running servers'
 * versions from it, and `batchwise tune` takes the server's p99 from its request-duration histogram.
 */
import type { VersionFigures } from './canary-judge.ts';

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * The samples of Prometheus' text exposition format (version 0.0.4): comments skipped, labels
 * unescaped. (parse-prometheus-text-format 1.1.1 was tried: it merges labelled histogram series
 * into one and drops their labels.)
 */
export function parsePrometheusSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(LABEL)) {
      labels[key!] = value!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    }
    const value = match[3] === '+Inf' ? Infinity : match[3] === '-Inf' ? -Infinity : Number(match[3]);
    samples.push({ name: match[1]!, labels, value });
  }
  return samples;
}

/** A model version's figures in one scrape (the server's own metric names). */
export function figuresFromSamples(samples: readonly Sample[], model: string, version: string): VersionFigures {
  const mine = samples.filter((s) => s.labels['model'] === model && s.labels['version'] === version);
  const sum = (name: string) => mine.filter((s) => s.name === name).reduce((total, s) => total + s.value, 0);
  const buckets = mine
    .filter((s) => s.name === 'batchwise_inference_request_duration_seconds_bucket' && s.labels['le'] !== '+Inf')
    .map((s) => ({ le: Number(s.labels['le']), count: s.value }))
    .sort((a, b) => a.le - b.le);
  return {
    success: sum('nv_inference_request_success'),
    failure: sum('nv_inference_request_failure'),
    latencyBounds: buckets.map((b) => b.le),
    latencyCumulative: buckets.map((b) => b.count),
  };
}
