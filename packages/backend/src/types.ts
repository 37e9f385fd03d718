/** KServe v2 datatypes a JavaScript model sees. */
export type DataType =
  'BOOL' | 'UINT8' | 'UINT16' | 'UINT32' | 'UINT64' | 'INT8' | 'INT16' | 'INT32' | 'INT64' | 'FP16' | 'FP32' | 'FP64' | 'BYTES';

/**
 * A tensor's elements, row-major. BOOL: Uint8Array of 0/1; FP16: Uint16Array of the bits;
 * INT64/UINT64: BigInt64Array/BigUint64Array; BYTES: one Buffer per element.
 */
export type TensorData =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | BigUint64Array
  | BigInt64Array
  | Float32Array
  | Float64Array
  | Buffer[];

export interface Tensor {
  readonly name: string;
  readonly datatype: DataType;
  readonly shape: readonly number[];
  readonly data: TensorData;
}

/** One request of the batch `execute` receives. */
export interface ModelRequest {
  readonly id?: string;
  /** Each input with this request's own shape (batch dimension first when max_batch_size > 0). */
  readonly inputs: Readonly<Record<string, Tensor>>;
  /** What the caller asked for (every config output when it asked for none). */
  readonly requestedOutputs: readonly string[];
  readonly parameters: Readonly<Record<string, string | number | boolean>>;
  /**
   * Aborted when the request is cancelled (its client closed its connection, stream or call) or, in a
   * decoupled model, when it ended without its final response (its timeout, the instance's failure):
   * check it, or pass it on (to `inferModel`, `fetch`...), and stop working for the request.
   */
  readonly signal: AbortSignal;
  /**
   * In a decoupled model (`model_transaction_policy { decoupled: true }`) only: sends this request's
   * responses, during `execute` or after it returned, as Triton's Python backend's
   * `request.get_response_sender()`. Absent otherwise.
   */
  readonly responseSender?: ResponseSender;
}

/**
 * The responses of one request of a decoupled model: zero, one or many, in order, then the final flag
 * (with the last response, or alone). Triton's `InferenceResponseSender`.
 */
export interface ResponseSender {
  /**
   * Sends one response: outputs (`{ outputs }`), or an error for this request (`{ error }`, or an Error),
   * and with `{ final: true }` ends the request; `send(undefined, { final: true })` ends it without a
   * response (Triton's flag-only final response). Resolves once the server has room for the next
   * response: while the client reads slower than the model sends, it waits (backpressure). Rejects with
   * a `ResponseSenderError` after the final response, once the request was cancelled, or once it ended
   * without one (its timeout).
   */
  send(response?: ModelResponse | Error, options?: { readonly final?: boolean }): Promise<void>;
  /** Whether the request was cancelled (Triton's `response_sender.is_cancelled()`); `request.signal.aborted` says it too. */
  isCancelled(): boolean;
  /** True once the final response was sent or the request ended otherwise: later sends fail. */
  readonly closed: boolean;
}

/** Outputs of one request, or an error for that request alone. */
export type ModelResponse = { readonly outputs: readonly Tensor[] } | { readonly error: Error };

export interface InitializeArgs {
  /** The model's config as the config endpoint shows it (Triton's JSON). */
  readonly config: Record<string, unknown>;
  readonly modelName: string;
  readonly modelVersion: string;
  readonly instanceName: string;
  readonly instanceKind: 'KIND_CPU' | 'KIND_GPU';
  readonly deviceId: number;
  /** The model folder (holds config.pbtxt). */
  readonly modelDir: string;
  /** The version folder (model.mjs, vocabulary files...). */
  readonly versionDir: string;
}

/** What a model file's default export is (an object), or creates (a class, instantiated with `new` and no arguments). */
export interface JsModel {
  initialize?(args: InitializeArgs): void | Promise<void>;
  /**
   * One response per request, in order: outputs, or an error for that request alone (an Error instance
   * may be returned directly). A decoupled model returns nothing and sends through each request's
   * `responseSender` instead (what it returns is ignored).
   */
  execute(
    requests: readonly ModelRequest[],
  ): readonly (ModelResponse | Error)[] | Promise<readonly (ModelResponse | Error)[]> | void | Promise<void>;
  finalize?(): void | Promise<void>;
}

/** A call from model code to another model of the server (Triton's BLS). */
export interface InferModelRequest {
  readonly model: string;
  /** Empty or absent: the version the model's version policy serves (the highest ready). */
  readonly version?: string;
  readonly inputs: readonly Tensor[];
  /** Absent or empty: every output of the called model. */
  readonly outputs?: readonly string[];
  readonly parameters?: Record<string, string | number | boolean>;
  /** Cancels the call when aborted: pass the request's `signal`, so that a cancelled request's calls leave their queues too. */
  readonly signal?: AbortSignal;
}

export interface InferModelResult {
  readonly model: string;
  readonly version: string;
  readonly outputs: readonly Tensor[];
  /** The output of that name; throws if the called model did not return it. */
  output(name: string): Tensor;
}
