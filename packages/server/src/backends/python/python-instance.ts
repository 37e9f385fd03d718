import type { ModelConfig } from '../../config/model-config.ts';
import { isErrorCode } from '@batchwise/protocol';
import { Errors, InferenceServerError, toInferenceServerError } from '../../errors/errors.ts';
import type { InferenceCall, InferenceRequest, InferenceStreamCall } from '../../protocol/types.ts';
import type { Parameters, Tensor } from '../../tensor/tensor.ts';
import type {
  ExecutionResult,
  ExecutionTimings,
  InstanceRequest,
  ModelInstance,
  RequestOutcome,
  RequestsResult,
  StreamedResponse,
} from '../backend.ts';
import { withResponseParameters } from '../../protocol/response-parameters.ts';
import { LiveRequests } from '../js/live-requests.ts';
import { packTensors, type ToWorker } from '../js/protocol.ts';
import { StreamedCall } from '../js/streamed-call.ts';
import { executeAsOneRequest, PendingRuns, type PendingRun } from '../pending-runs.ts';
import { SupervisedWorker, type RestartBackoff } from '../worker-supervision.ts';
import type { FromStub, Slice, StubAnswer, StubRequest, StubResponse, ToStub } from './protocol.ts';
import type { StubMessage, StubProcess } from './stub-process.ts';

export interface PythonInstanceOptions {
  readonly modelName: string;
  /** Triton's name of the instance, `<group>_<index>` (its errors name it). */
  readonly instanceName: string;
  readonly config: ModelConfig;
  /** batchwise_execute_timeout_ms: a longer execute kills the process, which is restarted. */
  readonly timeoutMs: number;
  readonly decoupled: boolean;
  readonly finalResponseTimeoutMs: number;
  readonly callModel: InferenceCall | undefined;
  readonly streamModel: InferenceStreamCall | undefined;
  /** Starts a fresh stub and resolves once its model is initialized. */
  readonly spawn: () => StubProcess;
  readonly load: (stub: StubProcess) => Promise<StubProcess>;
  readonly backoff: RestartBackoff;
  /** A process died (how, in words): counted and logged once by the backend. */
  readonly onDeath: (how: string) => void;
}

/** A batch answered but for requests whose senders have not sent yet. */
interface AwaitedRun {
  readonly run: PendingRun;
  readonly outcomes: (RequestOutcome | undefined)[];
  readonly timings: ExecutionTimings;
  remaining: number;
  timer: NodeJS.Timeout;
}

/**
 * One instance of a Python model: its stub process (one per instance, so instances never share a
 * GIL), kept alive by supervision. Sends each batch's requests (inputs in the shared-memory input
 * region), reads their outputs from the output region once, serves the model's BLS calls through
 * the server, and passes a decoupled model's responses to each request's sink. A process that
 * dies (an exception in a C extension, os._exit, the OOM killer) or overruns the execute timeout
 * fails only what it was running and is restarted with back-off.
 */
export class PythonInstance implements ModelInstance {
  private nextId = 0;
  private nextKey = 0;
  private readonly pending: PendingRuns<StubProcess>;
  /** Requests whose execute() returned before their sender answered, by key (awaitSenders). */
  private readonly awaited = new Map<number, { readonly run: AwaitedRun; readonly index: number }>();
  private readonly calls = new Map<number, AbortController>();
  private readonly streamedCalls = new Map<number, StreamedCall>();
  private readonly stub: SupervisedWorker<StubMessage, StubProcess>;
  private readonly live: LiveRequests<StubProcess>;
  private readonly modelName: string;

  constructor(
    first: StubProcess,
    private readonly options: PythonInstanceOptions,
  ) {
    this.modelName = options.modelName;
    this.live = new LiveRequests<StubProcess>(options.modelName, options.finalResponseTimeoutMs, (stub, notice) => {
      if (!this.stub.isCurrent(stub)) return;
      if (notice.type === 'end') stub.postMessage({ t: 'end', key: notice.key, code: notice.code, message: notice.message });
      else stub.postMessage({ t: 'ack', key: notice.key, count: notice.count });
    });
    this.pending = new PendingRuns(this.live, options.decoupled);
    this.stub = new SupervisedWorker<StubMessage, StubProcess>(first, {
      spawn: options.spawn,
      load: options.load,
      backoff: options.backoff,
      closeMessage: { t: 'close' } satisfies ToStub,
      instance: `model instance of '${options.modelName}'`,
      onMessage: (stub, message) => this.onMessage(stub, message),
      onDeath: (how, stub) => {
        options.onDeath(how);
        this.failStub(
          stub,
          Errors.internal(`model '${options.modelName}': its Python process died (${how}); the batch it was running failed`),
        );
      },
      error: Errors.unavailable,
      closeGraceMs: Math.min(options.timeoutMs, 30_000),
    });
  }

  set onFatal(handler: ((error: Error) => void) | undefined) {
    this.stub.onFatal = handler;
  }

  get onFatal(): ((error: Error) => void) | undefined {
    return this.stub.onFatal;
  }

  /** One assembled batch as one request (warmup samples); a decoupled model's last response is its answer. */
  execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    return executeAsOneRequest((requests) => this.executeRequests(requests), this.options.decoupled, inputs, outputNames);
  }

  async executeRequests(requests: readonly InstanceRequest[]): Promise<RequestsResult> {
    const stub = await this.stub.ready();
    const id = this.nextId++;
    const slices = stub.regions.writeInputs(requests.map((r) => r.inputs));
    const keys: number[] = [];
    const wire: StubRequest[] = [];
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i]!;
      const key = this.nextKey++;
      keys.push(key);
      wire.push(stubRequest(key, r, slices[i]!));
    }
    return new Promise<RequestsResult>((resolve, reject) => {
      const timer = setTimeout(() => this.onTimeout(stub, id), this.options.timeoutMs);
      const ended = requests.map((r, i) => this.live.add(keys[i]!, r, stub));
      this.pending.add(id, { requests, keys, ended, timer, resolve, reject });
      stub.postMessage({ t: 'execute', id, inSize: stub.regions.inSize, requests: wire });
      requests.forEach((r, i) => r.signal?.aborted && this.live.end(keys[i]!, Errors.cancelled()));
    });
  }

  async close(): Promise<void> {
    await this.stub.close();
    const error = Errors.unavailable(`model instance of '${this.modelName}' closed before answering`);
    this.failAwaited(error);
    this.pending.failAll(error);
    this.live.endAllOf(undefined, error);
    this.cancelStreamedCalls();
  }

  /** Test hook: kills the process as a crash would. */
  crashForTesting(): Promise<number> {
    return this.stub.crashForTesting();
  }

  private onMessage(stub: StubProcess, { message, data }: StubMessage): void {
    switch (message.t) {
      case 'call':
        void this.serveCall(stub, message, data);
        return;
      case 'call-cancel':
        this.calls.get(message.call)?.abort();
        return;
      case 'call-ack':
        this.streamedCalls.get(message.call)?.acknowledge(message.count);
        return;
      case 'response':
        this.onResponse(message, data);
        return;
      case 'executed':
      case 'execute-failed':
        break;
      default:
        return;
    }
    const run = this.pending.take(message.id);
    if (!run) return;
    if (message.t === 'execute-failed') {
      // Triton's words (pb_stub.cc), which its clients and tests match; the stub writes the same for a batch it answers in part.
      this.pending.fail(
        run,
        Errors.internal(`Failed to process the request(s) for model '${this.options.instanceName}', message: ${message.message}`),
      );
      return;
    }
    const awaiting = !this.options.decoupled && message.responses.some((r) => 'pending' in r);
    if (!awaiting && this.pending.returned(run, message.timings)) return;
    let outputs: Buffer;
    try {
      outputs = stub.regions.readOutputs(bytesUsed(message.responses));
    } catch (error) {
      this.pending.fail(run, Errors.internal(`model '${this.modelName}': ${(error as Error).message}`));
      return;
    }
    const outcomes = message.responses.map((response, i) =>
      'pending' in response ? undefined : this.outcome(outputs, response, run.requests[i]!),
    );
    if (!awaiting) {
      run.resolve({ responses: outcomes as RequestOutcome[], timings: message.timings });
      return;
    }
    this.awaitSenders(run, outcomes, message.timings);
  }

  /**
   * A batch whose execute() returned None for some requests before their senders sent (Triton's
   * default-mode sender may answer after execute returns): it is answered once each of them has, or,
   * for those that have not within the execute timeout, with an error.
   */
  private awaitSenders(run: PendingRun, outcomes: (RequestOutcome | undefined)[], timings: ExecutionTimings): void {
    const awaited: AwaitedRun = { run, outcomes, timings, remaining: 0, timer: undefined! };
    run.keys.forEach((key, i) => {
      if (outcomes[i] !== undefined) this.live.done(key);
      else {
        awaited.remaining++;
        this.awaited.set(key, { run: awaited, index: i });
      }
    });
    awaited.timer = setTimeout(() => {
      const error = Errors.internal(
        `model '${this.modelName}': execute() returned without a response and its response sender sent none within ` +
          `${this.options.timeoutMs} ms (parameter batchwise_execute_timeout_ms)`,
      );
      this.endAwaited(awaited, error);
    }, this.options.timeoutMs);
  }

  /** The awaited requests of `awaited` still without a response get `error`, and its batch is answered. */
  private endAwaited(awaited: AwaitedRun, error: Error): void {
    awaited.run.keys.forEach((key, i) => {
      if (this.awaited.get(key)?.run !== awaited) return;
      this.awaited.delete(key);
      this.live.done(key);
      awaited.outcomes[i] = { error };
    });
    awaited.remaining = 0;
    this.settleAwaited(awaited);
  }

  private settleAwaited(awaited: AwaitedRun): void {
    if (awaited.remaining > 0) return;
    clearTimeout(awaited.timer);
    awaited.run.resolve({ responses: awaited.outcomes as RequestOutcome[], timings: awaited.timings });
  }

  private onResponse(message: Extract<FromStub, { t: 'response' }>, data: Buffer): void {
    const request = this.live.requestOf(message.key);
    if (!request) return;
    const response = message.response && this.outcome(data, message.response, request);
    const awaited = this.awaited.get(message.key);
    if (awaited) {
      this.awaited.delete(message.key);
      this.live.done(message.key);
      awaited.run.outcomes[awaited.index] = response ?? { error: Errors.internal(`model '${this.modelName}' sent an empty response`) };
      awaited.run.remaining--;
      this.settleAwaited(awaited.run);
      return;
    }
    this.live.response(message.key, response as StreamedResponse | undefined, message.final);
  }

  /**
   * A response's outputs, in the order the request asked for them. As in Triton, an output is sent with
   * the datatype and shape the model gave it; one the request asked for and the model did not return fails it.
   */
  private outcome(buffer: Buffer, response: StubAnswer, request: InstanceRequest): RequestOutcome {
    if ('error' in response) {
      const code = isErrorCode(response.error.code) ? response.error.code : 'INTERNAL';
      return { error: new InferenceServerError(code, response.error.message) };
    }
    const byName = new Map(response.outputs.map((s) => [s.name, s]));
    const outputs: Tensor[] = [];
    for (const name of request.outputNames) {
      const s = byName.get(name);
      if (!s) {
        return { error: Errors.internal(`model '${this.modelName}' returned no output '${name}', which the request asked for`) };
      }
      outputs.push({ name, datatype: s.datatype, shape: s.shape as number[], data: buffer.subarray(s.offset, s.offset + s.byteLength) });
    }
    return { outputs: withResponseParameters(outputs, response.parameters) };
  }

  /** A BLS call (`InferenceRequest(...).exec()`): run through the server, answered to the stub that asked. */
  private async serveCall(stub: StubProcess, message: Extract<FromStub, { t: 'call' }>, data: Buffer): Promise<void> {
    const callId = message.call;
    const post = (answer: ToStub, payload?: Uint8Array): void => {
      if (this.stub.isCurrent(stub)) stub.postMessage(answer, payload);
    };
    const own = new AbortController();
    this.calls.set(callId, own);
    try {
      const run = message.stream ? this.options.streamModel : this.options.callModel;
      if (!run) throw Errors.unavailable('calls to other models are not available in this server');
      const request: InferenceRequest = {
        modelName: message.model,
        ...(message.version !== undefined && message.version !== '-1' && { modelVersion: message.version }),
        inputs: message.inputs.map((s) => ({
          name: s.name,
          datatype: s.datatype,
          shape: [...s.shape],
          data: data.subarray(s.offset, s.offset + s.byteLength),
        })),
        ...(message.outputs !== undefined &&
          message.outputs.length > 0 && { outputs: message.outputs.map((name) => ({ name, parameters: {} })) }),
        parameters: callParameters(message),
        ...this.pending.callerOf(message.execute),
      };
      if (message.stream) {
        const streamed = new StreamedCall(callId, (answer: ToWorker, transfer?: ArrayBuffer[]) => {
          if (answer.type === 'call-end') post({ t: 'call-end', call: callId });
          else if (answer.type === 'call-response') {
            post(
              {
                t: 'call-response',
                call: callId,
                model: answer.model,
                version: answer.version,
                outputs: answer.outputs,
                ...(answer.parameters && { parameters: answer.parameters }),
                final: answer.final,
              },
              new Uint8Array(transfer?.[0] ?? answer.buffer),
            );
          }
        });
        this.streamedCalls.set(callId, streamed);
        await streamed.serve(this.options.streamModel!, request, own);
        return;
      }
      const response = await this.options.callModel!(request, { signal: own.signal });
      const { buffer, slices } = packTensors([response.outputs]);
      post(
        {
          t: 'call-result',
          call: callId,
          model: response.modelName,
          version: response.modelVersion,
          outputs: slices[0]!,
          ...(response.parameters && { parameters: response.parameters }),
        },
        new Uint8Array(buffer),
      );
    } catch (error) {
      const e = toInferenceServerError(error);
      post({ t: 'call-failed', call: callId, code: e.code, message: e.message });
    } finally {
      this.calls.delete(callId);
      this.streamedCalls.delete(callId);
    }
  }

  private onTimeout(stub: StubProcess, id: number): void {
    if (!this.stub.isCurrent(stub)) return;
    const run = this.pending.take(id);
    if (!run) return;
    const error = Errors.internal(
      `model '${this.modelName}': execute() did not finish within ${this.options.timeoutMs} ms (parameter batchwise_execute_timeout_ms); ` +
        'its Python process was killed and is restarted',
    );
    this.pending.fail(run, error);
    this.live.endAllOf(stub, error);
    this.cancelStreamedCalls();
    void stub.terminate();
    this.stub.died(stub, `killed after its execute timeout of ${this.options.timeoutMs} ms`);
  }

  private failStub(stub: StubProcess, error: Error): void {
    this.failAwaited(error);
    this.pending.failAll(error);
    this.live.endAllOf(stub, error);
    this.cancelStreamedCalls();
  }

  /** The process died or closed: requests awaiting their sender's response fail with `error`. */
  private failAwaited(error: Error): void {
    for (const run of new Set([...this.awaited.values()].map((a) => a.run))) this.endAwaited(run, error);
  }

  private cancelStreamedCalls(): void {
    for (const controller of this.calls.values()) controller.abort();
  }
}

/** What the stub is told of a request: Triton's correlation id, flags and timeout from its parameters. */
function stubRequest(key: number, request: InstanceRequest, inputs: Slice[]): StubRequest {
  const p = request.parameters;
  const sequenceId = p['sequence_id'];
  const timeout = p['timeout'];
  return {
    key,
    id: request.id ?? '',
    inputs,
    outputs: request.outputNames,
    parameters: p,
    correlationId:
      typeof sequenceId === 'string' || typeof sequenceId === 'number'
        ? sequenceId
        : typeof sequenceId === 'bigint'
          ? Number(sequenceId)
          : 0,
    flags: (p['sequence_start'] === true ? 1 : 0) | (p['sequence_end'] === true ? 2 : 0),
    timeoutUs: typeof timeout === 'number' ? timeout : 0,
  };
}

/** A BLS call's parameters as the server's request parameters: its own, and its correlation id, flags and timeout. */
function callParameters(message: Extract<FromStub, { t: 'call' }>): Parameters {
  const parameters: Record<string, Parameters[string]> = { ...(message.parameters ?? {}) };
  const id = message.correlationId;
  if (id !== undefined && id !== 0 && id !== '') parameters['sequence_id'] = id;
  if (message.flags) {
    if (message.flags & 1) parameters['sequence_start'] = true;
    if (message.flags & 2) parameters['sequence_end'] = true;
  }
  if (message.timeoutUs) parameters['timeout'] = message.timeoutUs;
  return parameters;
}

/** Where the last output of a batch ends in the output region. */
function bytesUsed(responses: readonly StubResponse[]): number {
  let end = 0;
  for (const r of responses) if ('outputs' in r) for (const s of r.outputs) end = Math.max(end, s.offset + s.byteLength);
  return end;
}
