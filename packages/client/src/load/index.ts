/**
 * `@batchwise/client/load`: perf_analyzer-style load generation (closed and open loop), latency
 * statistics and a throughput-versus-latency SVG plot, shared by bench/ and `batchwise tune`.
 */
export * from './load-generator.ts';
export * from './stats.ts';
export * from './plot.ts';
