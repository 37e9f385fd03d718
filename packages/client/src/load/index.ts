/**
 * `@batchwise/client/load`: perf_analyzer-style load generation (closed and open loop), latency
 * statistics, a throughput-versus-latency SVG plot, and what a measurement reads beside the
 * latencies (the server's statistics over it, and the CPU of the generator, the server and the
 * rest of the host), shared by bench/ and `batchwise tune`.
 */
export * from './load-generator.ts';
export * from './stats.ts';
export * from './plot.ts';
export * from './cpu-usage.ts';
export * from './server-stats.ts';
