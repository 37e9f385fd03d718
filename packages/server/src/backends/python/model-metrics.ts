import type { FromStub } from './protocol.ts';

/** A custom metric message of a model (pb_utils.MetricFamily and its metrics). */
export type CustomMetricMessage = Extract<FromStub, { t: 'metric-family' | 'metric' }>;

/** Where the Python backend counts what its models' processes do; metrics/ implements it. */
export interface PythonModelMetrics {
  /** A model's process died (crashed, killed, or stopped after its execute timeout). */
  processDied(model: string, version: string): void;
  /** A custom metric family declared, or a metric changed, by model code. */
  customMetric(message: CustomMetricMessage): void;
}
