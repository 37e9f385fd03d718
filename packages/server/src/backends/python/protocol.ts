/**
 * Messages between the server and a Python model's stub process (stub/stub.py; the Python side
 * mirrors this file). One UNIX socket, the child's fd 3, carries frames both ways:
 *
 *   uint32 LE headerBytes | uint32 LE dataBytes | header (UTF-8 JSON) | data (raw bytes)
 *
 * A header is one of the messages below. Tensors travel as slices ({ name, datatype, shape,
 * offset, byteLength }; BYTES in the KServe layout, each element a uint32 LE length and its bytes):
 *
 * - an execute's inputs are in the instance's input region, a shared-memory file the server writes
 *   (its size in `inSize`: the stub maps it again when it grew) and the stub reads in place
 *   (`as_numpy()` is a view);
 * - an execute's outputs are in the output region, which the stub writes (growing the file by the
 *   growth step when they do not fit, its size in `outSize`) and the server reads once;
 * - every other message's tensors (calls to other models, their results, a decoupled model's
 *   responses) are in the frame's own data, offsets counted from its start.
 *
 * Each slice starts at a multiple of 8 bytes, so any dtype can view it in place.
 */
import type { DataType } from '../../tensor/datatype.ts';
import type { Parameters } from '../../tensor/tensor.ts';
import type { ExecutionTimings } from '../backend.ts';

export interface Slice {
  readonly name: string;
  readonly datatype: DataType;
  readonly shape: readonly number[];
  readonly offset: number;
  readonly byteLength: number;
}

/** The seven strings of Triton's `initialize(args)`. */
export interface InitializeArgs {
  readonly model_config: string;
  readonly model_instance_kind: string;
  readonly model_instance_name: string;
  readonly model_instance_device_id: string;
  readonly model_repository: string;
  readonly model_version: string;
  readonly model_name: string;
}

export interface StubRequest {
  /** The instance's number for the request: its responses, acknowledgements and end name it. */
  readonly key: number;
  readonly id: string;
  readonly inputs: readonly Slice[];
  /** The outputs the request asked for (every config output when it asked for none). */
  readonly outputs: readonly string[];
  readonly parameters: Parameters;
  /** The sequence's correlation id (0 when none): a number, or a string for a STRING id. */
  readonly correlationId: number | string;
  /** TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) | SEQUENCE_END (2). */
  readonly flags: number;
  /** The request's timeout in microseconds, 0 when none. */
  readonly timeoutUs: number;
}

/** A request's answer: its outputs (`parameters`: the model's InferenceResponse(parameters=...), when it set any), or its error. */
export type StubAnswer =
  | { readonly outputs: readonly Slice[]; readonly parameters?: Parameters }
  | { readonly error: { readonly message: string; readonly code?: string } };

export type StubResponse =
  | StubAnswer
  /**
   * A request of a model that is not decoupled whose execute() returned None before its response sender
   * sent: its response comes later, in a `response` message of its own (Triton's default-mode sender).
   */
  | { readonly pending: true };

export type ToStub =
  /** First message. `mode: 'auto-complete'` runs only auto_complete_config and answers `completed`, then exits. */
  | {
      readonly t: 'init';
      readonly mode: 'serve' | 'auto-complete';
      readonly modelFile: string;
      /** Put first on sys.path, in this order: the version folder, the model folder. */
      readonly paths: readonly string[];
      readonly args: InitializeArgs;
      /** The config as JSON (the config endpoint's), what auto_complete_config starts from. */
      readonly config: Record<string, unknown>;
      readonly decoupled: boolean;
      /** Shared-memory files: inputs (server writes), outputs (stub writes). Opened, then unlinked by the server. */
      readonly inPath: string;
      readonly outPath: string;
      readonly shmGrowthBytes: number;
    }
  | { readonly t: 'execute'; readonly id: number; readonly inSize: number; readonly requests: readonly StubRequest[] }
  /** The result of a call (`exec()`), its outputs in the frame's data. */
  | {
      readonly t: 'call-result';
      readonly call: number;
      readonly model: string;
      readonly version: string;
      readonly outputs: readonly Slice[];
      /** The called model's response parameters, when it set any. */
      readonly parameters?: Parameters;
    }
  /** One response of a streamed call (`exec(decoupled=True)`), in the frame's data; `final` with its last. */
  | {
      readonly t: 'call-response';
      readonly call: number;
      readonly model: string;
      readonly version: string;
      readonly outputs: readonly Slice[];
      readonly parameters?: Parameters;
      readonly final: boolean;
    }
  /** A streamed call's final flag alone. */
  | { readonly t: 'call-end'; readonly call: number }
  | { readonly t: 'call-failed'; readonly call: number; readonly code: string; readonly message: string }
  /** The request ended before its model finished with it (cancelled, its final-response timeout): is_cancelled(), sends fail. */
  | { readonly t: 'end'; readonly key: number; readonly code: string; readonly message: string }
  /** `count` more responses of a decoupled request were taken for sending. */
  | { readonly t: 'ack'; readonly key: number; readonly count: number }
  /** finalize(), then exit. */
  | { readonly t: 'close' };

export type FromStub =
  | { readonly t: 'ready' }
  | { readonly t: 'load-failed'; readonly message: string }
  | { readonly t: 'completed'; readonly config: Record<string, unknown> }
  | {
      readonly t: 'executed';
      readonly id: number;
      /** One per request, in order; outputs in the output region. Empty for a decoupled model. */
      readonly responses: readonly StubResponse[];
      readonly outSize: number;
      readonly timings: ExecutionTimings;
    }
  | { readonly t: 'execute-failed'; readonly id: number; readonly message: string }
  /**
   * A decoupled request's response (absent: the final flag alone), tensors in the frame's data; or the
   * one response of a request an `executed` said was pending (always final then).
   */
  | { readonly t: 'response'; readonly key: number; readonly response?: StubAnswer; readonly final: boolean }
  /** BLS: `InferenceRequest(...).exec()` / `async_exec()`; inputs in the frame's data. */
  | {
      readonly t: 'call';
      readonly call: number;
      /** The execute during which the call was made (its trace joins that batch's). */
      readonly execute?: number;
      readonly model: string;
      /** -1 or absent: the policy's choice. */
      readonly version?: string;
      readonly inputs: readonly Slice[];
      readonly outputs?: readonly string[];
      readonly parameters?: Parameters;
      readonly correlationId?: number | string;
      readonly flags?: number;
      readonly timeoutUs?: number;
      /** exec(decoupled=True): every response of the called model, as it sends them. */
      readonly stream?: true;
    }
  /** Model code took `count` more responses of a streamed call. */
  | { readonly t: 'call-ack'; readonly call: number; readonly count: number }
  /** A streamed call's iterator was cancelled (`cancel()`). */
  | { readonly t: 'call-cancel'; readonly call: number }
  /** pb_utils.Logger: level 'info' | 'warn' | 'error' | 'verbose'. */
  | { readonly t: 'log'; readonly level: string; readonly message: string; readonly file?: string; readonly line?: number }
  /** A custom metric family (pb_utils.MetricFamily), declared once per process. */
  | { readonly t: 'metric-family'; readonly name: string; readonly description: string; readonly kind: 'counter' | 'gauge' | 'histogram' }
  /** A custom metric's change: increment, set, or observe (histograms, with the buckets the metric was made with). */
  | {
      readonly t: 'metric';
      readonly family: string;
      readonly labels: Readonly<Record<string, string>>;
      readonly op: 'increment' | 'set' | 'observe';
      readonly value: number;
      readonly buckets?: readonly number[];
    };

/** Responses of one decoupled request sent and not yet taken for sending, at most, before send() blocks. */
export const MAX_UNSENT_RESPONSES = 8;
/** The server acknowledges responses this many at a time (and the stub acknowledges a streamed call's). */
export const ACK_EVERY = MAX_UNSENT_RESPONSES / 2;
