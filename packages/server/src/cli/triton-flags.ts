import type { Command } from 'commander';
import { MAX_IN_FLIGHT_PER_STREAM } from '../grpc/stream-infer.ts';
import { attributeOf } from '../options/index.ts';
import { collect } from './flags.ts';

/**
 * Triton flags that a migrated command line may carry but that have nothing to act on here.
 * They are accepted, so the command line still starts the server, and each one given is
 * named in a start-up warning with the reason, so nothing is silently ignored.
 */
export const WITHOUT_EFFECT: readonly { readonly flag: string; readonly reason: string }[] = [
  {
    flag: 'grpc-keepalive-permit-without-calls',
    reason: 'the gRPC server pings idle connections too and accepts client pings without calls, as if true',
  },
  { flag: 'grpc-http2-max-pings-without-data', reason: 'the gRPC server does not limit pings without data' },
  {
    flag: 'grpc-http2-min-recv-ping-interval-without-data',
    reason: 'the gRPC server does not police client ping intervals; client pings are always accepted (node:http2 answers them)',
  },
  {
    flag: 'grpc-http2-max-ping-strikes',
    reason: 'the gRPC server counts no ping strikes and never closes a connection for too many pings',
  },
  {
    flag: 'metrics-config',
    reason:
      "Triton's counters and summaries settings do not apply: Batchwise always exports Triton's counters plus its own latency histograms",
  },
  { flag: 'model-load-thread-count', reason: 'models load concurrently; their sessions are created in worker threads' },
  { flag: 'http-thread-count', reason: 'HTTP is served by the event loop; model runs are in worker threads (instance_group count)' },
  { flag: 'grpc-infer-allocation-pool-size', reason: 'gRPC messages are not pooled' },
  {
    // Triton's L0_decoupled passes it, and Triton's hardening guide advises it for decoupled streaming.
    flag: 'grpc-max-response-pool-size',
    reason:
      'responses are not pooled, and what it guards against is bounded already: a ModelStreamInfer stream holds at most ' +
      `${MAX_IN_FLIGHT_PER_STREAM} requests in flight ` +
      'and takes no further response from a model while its client does not read; that bound is not configurable yet',
  },
  {
    flag: 'pinned-memory-pool-byte-size',
    reason: 'ONNX Runtime manages its own host buffers; the memory budget (--memory-limit) bounds host memory',
  },
  {
    flag: 'cuda-memory-pool-byte-size',
    reason: 'onnxruntime-node passes only the device id to the CUDA execution provider; GPU memory cannot be capped from here',
  },
  { flag: 'backend-directory', reason: 'the ONNX Runtime backend is built in' },
  { flag: 'repoagent-directory', reason: 'repository agents are not supported' },
  { flag: 'min-supported-compute-capability', reason: 'the CUDA execution provider decides which GPUs it can use' },
  { flag: 'buffer-manager-thread-count', reason: 'no buffer manager threads' },
];

export function addFlagsWithoutEffect(command: Command): Command {
  for (const { flag, reason } of WITHOUT_EFFECT) {
    command.option(`--${flag} <value>`, `accepted for Triton command lines; no effect: ${reason}`, collect);
  }
  return command;
}

/** One warning per flag without effect that was given: the flag, its values and why it does nothing. */
export function flagsWithoutEffectGiven(flags: Readonly<Record<string, unknown>>): { flag: string; values: string[]; reason: string }[] {
  return WITHOUT_EFFECT.flatMap(({ flag, reason }) => {
    const values = flags[attributeOf(`--${flag}`)];
    return Array.isArray(values) ? [{ flag: `--${flag}`, values: values as string[], reason }] : [];
  });
}
