import type { ModelConfig } from '../config/model-config.ts';
import type { Parameters, Tensor } from '../tensor/tensor.ts';
import { Errors, toInferenceServerError } from '../errors/errors.ts';
import type { ObjectiveRefusal, QueuedRequest } from '../scheduler/scheduler.ts';
import type { LoadedVersion } from '../models/loaded-version.ts';
import type { ModelRegistry } from '../models/model-registry.ts';
import type { RouteKeys } from '../models/canary-control.ts';
import { CANARY_KEY_PARAMETER } from '../repository/canary-declaration.ts';
import type { ModelControl, UnloadOptions } from '../models/model-control.ts';
import type { LoadParameters } from '../models/load-parameters.ts';
import type { MemoryGuard, MemoryReservation } from '../memory/memory-guard.ts';
import { advanceChargeBytes, requestChargeBytes, type SentAsJson } from '../memory/request-charge.ts';
import { validateRequest, type ValidatedRequest } from './request-validation.ts';
import { checkCorrelationId, requestSequenceOf } from './sequence-parameters.ts';
import type { RequestSequence } from '../protocol/types.ts';
import { responseParametersOf, withResponseParameters } from '../protocol/response-parameters.ts';
import { reshapeDims } from '../tensor/reshape.ts';
import { classify } from './classification.ts';
import {
  checkElementCount,
  checkInputElements,
  checkRequestStrings,
  checkStringElements,
  checkValidatedElements,
} from './element-admission.ts';
import { pino, type Logger } from 'pino';
import { currentLogSettings, updateLogSettings, type LogSettings } from '../logging/log-settings.ts';
import type { ResponseCache } from '../cache/response-cache.ts';
import { Tracer, type RequestTrace } from '../trace/tracer.ts';
import type { TraceSettings, TraceSettingsUpdate } from '../trace/trace-settings.ts';
import { RequestSharedMemory } from '../shared-memory/request-shared-memory.ts';
import { SystemSharedMemory, type SharedMemoryRegionStatus } from '../shared-memory/system-shared-memory.ts';
import type { BodyTarget, ElementCensus, InferenceService, InferOptions } from './types.ts';
import { ResponseQueue, type InferenceStream } from './response-stream.ts';
import type { ResponseSink } from '../backends/backend.ts';
import { isDecoupled } from '../config/transaction-policy.ts';
import type {
  InferenceRequest,
  InferenceResponse,
  ModelMetadata,
  ModelStatistics,
  RepositoryIndexEntry,
  ServerMetadata,
} from '../protocol/types.ts';

import { SERVER_NAME, SERVER_VERSION } from './version.ts';
const EXTENSIONS = [
  'classification',
  'sequence',
  'sequence(string_id)',
  'model_repository',
  'schedule_policy',
  'model_configuration',
  'system_shared_memory',
  'statistics',
  'binary_tensor_data',
  'trace',
  'logging',
];

export interface CoreInferenceServiceOptions {
  readonly sharedMemory?: SystemSharedMemory;
  readonly tracer?: Tracer;
  /**
   * Triton's --strict-readiness: the server is ready only while every model it should serve
   * is ready. When false it is ready once start-up loading is done, whatever failed. @default true
   */
  readonly strictReadiness?: boolean;
  /** Triton's --cache-config local cache, for models whose config enables response_cache. */
  readonly responseCache?: ResponseCache;
  /** --max-request-elements: tensor elements one request may carry. @default no limit */
  readonly maxRequestElements?: number;
  /** Triton's --id: the server's name in its metadata. @default SERVER_NAME */
  readonly serverName?: string;
  readonly logger?: Logger;
}

/** A request's memory reservation and how its outputs will be sent (and taken: one response, or a stream). */
interface Charge {
  readonly memory: MemoryReservation;
  readonly sentAsJson: SentAsJson | undefined;
  /** Aborted when its client goes away (InferOptions.signal). */
  readonly signal: AbortSignal | undefined;
  /** inferStream: where its responses go (a decoupled model's, as it sends them). */
  readonly stream: ResponseQueue | undefined;
}

/** The one implementation of InferenceService that both frontends share. */
export class CoreInferenceService implements InferenceService {
  private ready = false;

  private readonly sharedMemory: SystemSharedMemory;
  private readonly tracer: Tracer;
  private readonly strictReadiness: boolean;
  private readonly responseCache: ResponseCache | undefined;
  private readonly logger: Logger;
  private readonly warnedNoCache = new Set<string>();
  private readonly maxRequestElements: number;
  private readonly serverName: string;

  constructor(
    private readonly models: ModelRegistry,
    private readonly control: ModelControl,
    private readonly memory: MemoryGuard,
    options: CoreInferenceServiceOptions = {},
  ) {
    this.sharedMemory = options.sharedMemory ?? new SystemSharedMemory();
    this.tracer = options.tracer ?? new Tracer({}, options.logger ?? pino({ level: 'silent' }));
    this.strictReadiness = options.strictReadiness ?? true;
    this.responseCache = options.responseCache;
    this.maxRequestElements = options.maxRequestElements ?? Infinity;
    this.serverName = options.serverName ?? SERVER_NAME;
    this.logger = options.logger ?? pino({ level: 'silent' });
  }

  /** Set by the server once start-up loading is done; cleared first thing on shutdown. */
  setReady(ready: boolean): void {
    this.ready = ready;
  }

  isLive(): boolean {
    return true;
  }

  isReady(): boolean {
    return this.ready && (!this.strictReadiness || this.models.allReady());
  }

  serverMetadata(): ServerMetadata {
    return { name: this.serverName, version: SERVER_VERSION, extensions: EXTENSIONS };
  }

  isModelReady(modelName: string, modelVersion?: string): boolean {
    return this.models.isModelReady(modelName, policyVersion(modelVersion));
  }

  modelMetadata(modelName: string, modelVersion?: string): ModelMetadata {
    const model = this.models.resolve(modelName, policyVersion(modelVersion));
    const batch = model.maxBatchSize > 0 ? [-1] : [];
    return {
      name: modelName,
      versions: modelVersion ? [model.version] : this.models.readyVersions(modelName),
      // Triton reports the backend's name for a model without a platform (python there, js here).
      platform: model.config.platform || model.config.backend || 'onnxruntime_onnx',
      inputs: model.inputs.map((i) => ({ name: i.name, datatype: i.datatype, shape: [...batch, ...i.dims] })),
      outputs: model.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: [...batch, ...o.dims] })),
      parameters: {
        // An ensemble runs nothing itself: its steps' models have providers.
        ...(model.executionProvider !== '' && { execution_provider: model.executionProvider }),
        ...(model.fallbackReason !== undefined && { cpu_fallback_reason: model.fallbackReason }),
        ...model.unappliedSettings,
      },
    };
  }

  modelConfig(modelName: string, modelVersion?: string): ModelConfig {
    return this.models.configOf(modelName, policyVersion(modelVersion));
  }

  shedOnArrival(
    target: { readonly modelName: string; readonly modelVersion?: string; readonly canaryKey?: string },
    arrivalNs: bigint,
  ): ObjectiveRefusal | undefined {
    const version = policyVersion(target.modelVersion);
    if (!this.models.isModelReady(target.modelName, version)) return undefined;
    const model = this.models.resolve(target.modelName, version, { header: target.canaryKey });
    return model.scheduler.shedOnArrival?.(1, arrivalNs);
  }

  infer(request: InferenceRequest, options: InferOptions = {}): Promise<InferenceResponse> {
    return this.submit(request, options, undefined);
  }

  isDecoupled(modelName: string, modelVersion?: string): boolean {
    const version = policyVersion(modelVersion);
    return this.models.isModelReady(modelName, version) && isDecoupled(this.models.resolve(modelName, version).config);
  }

  inferStream(request: InferenceRequest, options: InferOptions = {}): InferenceStream {
    const stream = new ResponseQueue(this.memory);
    this.submit(request, options, stream).then(
      (response) => {
        // A decoupled model's responses went into the stream as it sent them; any other model answers once.
        if (!stream.decoupled) void stream.push({ kind: 'response', response, final: true }, false);
        stream.end();
      },
      (error: unknown) => stream.fail(error),
    );
    return stream;
  }

  /**
   * One request, answered once (infer) or into a stream (inferStream). Not async itself: a request
   * that needs neither a load, shared memory nor a trace goes to its model's queue in this call,
   * through as few promises as its answer needs (issue 34).
   */
  private submit(request: InferenceRequest, options: InferOptions, stream: ResponseQueue | undefined): Promise<InferenceResponse> {
    const arrivalNs = options.arrivalNs ?? process.hrtime.bigint();
    if (options.signal?.aborted) return Promise.reject(Errors.cancelled());
    if (this.control.awaitsLoad(request.modelName) || usesSharedMemory(request) || !options.memory) {
      return this.submitHeld(request, options, stream, arrivalNs);
    }
    let model: LoadedVersion;
    try {
      model = this.models.resolve(request.modelName, policyVersion(request.modelVersion), routeKeysOf(request));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.run(request, model, arrivalNs, { memory: options.memory, sentAsJson: options.sentAsJson, signal: options.signal, stream });
  }

  /** submit's other cases: a model to wait for, shared memory to read and write, or memory the frontend did not reserve. */
  private async submitHeld(
    request: InferenceRequest,
    options: InferOptions,
    stream: ResponseQueue | undefined,
    arrivalNs: bigint,
  ): Promise<InferenceResponse> {
    const version = policyVersion(request.modelVersion);
    const keys = routeKeysOf(request);
    if (this.control.awaitsLoad(request.modelName)) await this.awaitLoad(request.modelName, loadWaitMs(request));
    const model = this.models.resolve(request.modelName, version, keys);
    // Inputs in shared memory are read into the process; the others arrived with the request.
    let receivedBytes = 0;
    let sharedMemoryBytes = 0;
    for (const input of request.inputs) {
      if (input.sharedMemory) sharedMemoryBytes += input.sharedMemory.byteSize;
      else receivedBytes += input.data.byteLength;
    }
    const memory = options.memory ?? this.memory.reserve(receivedBytes + sharedMemoryBytes);
    const charge: Charge = { memory, sentAsJson: options.sentAsJson, signal: options.signal, stream };
    let regions: RequestSharedMemory | undefined;
    try {
      if (options.memory) memory.grow(sharedMemoryBytes);
      regions = RequestSharedMemory.lease(request, this.sharedMemory);
      if (!regions) return await this.run(request, model, arrivalNs, charge);
      const read = await regions.readInputs(request);
      // An eviction may have unloaded it meanwhile (--load-on-demand): then the request waits for its reload.
      if (this.control.awaitsLoad(request.modelName)) await this.awaitLoad(request.modelName, loadWaitMs(request));
      // A swap may have retired `model` while the inputs were read: queue on what serves now.
      const response = await this.run(read, this.models.resolve(request.modelName, version ?? model.version), arrivalNs, charge);
      return await regions.writeOutputs(response);
    } finally {
      regions?.release();
      if (!options.memory) memory.release();
    }
  }

  private run(request: InferenceRequest, model: LoadedVersion, arrivalNs: bigint, charge: Charge): Promise<InferenceResponse> {
    const trace = this.tracer.start(model.modelName, model.version, request.id, request.parentTraceId, request.traceContext, arrivalNs);
    if (!trace) return this.runTraced(request, model, arrivalNs, charge, undefined);
    return this.runWithTrace(request, model, arrivalNs, charge, trace);
  }

  private async runWithTrace(
    request: InferenceRequest,
    model: LoadedVersion,
    arrivalNs: bigint,
    charge: Charge,
    trace: RequestTrace,
  ): Promise<InferenceResponse> {
    trace.mark('REQUEST_START', arrivalNs);
    let failure: unknown;
    try {
      const response = await this.runTraced(request, model, arrivalNs, charge, trace);
      return trace.context ? { ...response, traceparent: trace.context.traceparent } : response;
    } catch (error) {
      failure = error;
      throw error;
    } finally {
      trace.mark('REQUEST_END', process.hrtime.bigint());
      trace.end(failure);
    }
  }

  private async runTraced(
    request: InferenceRequest,
    model: LoadedVersion,
    arrivalNs: bigint,
    charge: Charge,
    trace: RequestTrace | undefined,
  ): Promise<InferenceResponse> {
    const decoupled = isDecoupled(model.config);
    if (decoupled && !charge.stream) {
      throw Errors.unsupported(
        `model '${model.modelName}' is decoupled (model_transaction_policy): its responses are served only as a stream ` +
          '(gRPC ModelStreamInfer, HTTP generate and generate_stream)',
      );
    }
    if (decoupled && request.outputs?.some((o) => o.sharedMemory)) {
      throw Errors.invalidArg(`model '${model.modelName}' is decoupled: its outputs cannot be written to shared memory`);
    }
    let validated;
    let stringHeapBytes;
    let sequence: RequestSequence | undefined;
    try {
      // Strings first: validation walks every BYTES element.
      stringHeapBytes = checkRequestStrings(model, request.inputs);
      validated = validateRequest(request, model);
      checkValidatedElements(validated.inputs, this.maxRequestElements);
      if (model.config.sequence_batching) {
        sequence = requestSequenceOf(request);
        checkCorrelationId(sequence, model.config, request.id);
      }
    } catch (error) {
      model.stats.recordFailure({ arrivalNs }, 'OTHER');
      throw toInferenceServerError(error);
    }
    // Charged once the shapes are known to be valid: a bad request gets its 400, not a 503.
    charge.memory.grow(requestChargeBytes(model, validated, charge.sentAsJson));
    // A decoupled model's responses go into the stream as it sends them; it has none to cache.
    const responses = decoupled
      ? streamSink(charge.stream!, (tensors) =>
          responseOf(request, model, withResponseParameters(finishOutputs(model, validated, tensors), responseParametersOf(tensors))),
        )
      : undefined;
    const lookup = decoupled ? undefined : this.cacheLookup(model, validated);
    if (lookup?.hit) {
      model.stats.recordCacheHit({ arrivalNs }, lookup.ns);
      return responseOf(request, model, [...lookup.hit]);
    }
    trace?.mark('QUEUE_START', process.hrtime.bigint());
    if (charge.stream) charge.stream.queued = true;
    const queued: QueuedRequest = {
      inputs: validated.inputs,
      batchSize: validated.batchSize,
      priority: validated.priority,
      timeoutMicroseconds: validated.timeoutMicroseconds,
      arrivalNs,
      stringHeapBytes,
      outputNames: validated.outputNames,
      parameters: request.parameters,
    };
    // Optional fields only when present: the common request carries none of them.
    if (trace) (queued as { trace?: RequestTrace }).trace = trace;
    if (request.id !== undefined) (queued as { id?: string }).id = request.id;
    if (sequence) (queued as { sequence?: RequestSequence }).sequence = sequence;
    if (model.ensemble && request.sequenceId !== undefined) (queued as { sequenceId?: bigint | string }).sequenceId = request.sequenceId;
    if (charge.signal) (queued as { signal?: AbortSignal }).signal = charge.signal;
    if (responses) (queued as { responses?: ResponseSink }).responses = responses;
    let batched: Tensor[];
    try {
      batched = await model.scheduler.enqueue(queued);
    } catch (error) {
      throw toInferenceServerError(error);
    }
    if (decoupled) return responseOf(request, model, []);
    const outputs = withResponseParameters(finishOutputs(model, validated, batched), responseParametersOf(batched));
    if (lookup) {
      const insertStartNs = process.hrtime.bigint();
      this.responseCache!.set(lookup.key, outputs);
      model.stats.recordCacheMiss(lookup.ns + Number(process.hrtime.bigint() - insertStartNs));
    }
    return responseOf(request, model, outputs);
  }

  /**
   * For a model that enabled the response cache: the request's key, the cached outputs if
   * any, and the time the lookup took (hashing included, as Triton counts it). Otherwise undefined.
   */
  private cacheLookup(
    model: LoadedVersion,
    validated: ValidatedRequest,
  ): { key: string; hit: readonly Tensor[] | undefined; ns: number } | undefined {
    if (!model.config.response_cache?.enable) return undefined;
    if (!this.responseCache) {
      if (!this.warnedNoCache.has(model.modelName)) {
        this.warnedNoCache.add(model.modelName);
        this.logger.warn(
          { model: model.modelName },
          'response_cache is enabled in config.pbtxt but the server has no cache: start it with --cache-config local,size=<bytes>',
        );
      }
      return undefined;
    }
    const startNs = process.hrtime.bigint();
    const outputs = validated.outputNames.map((name) => ({ name, classification: validated.classifications.get(name) }));
    const key = this.responseCache.keyOf(model.modelName, model.version, validated.inputs, outputs);
    const hit = this.responseCache.get(key);
    return { key, hit, ns: Number(process.hrtime.bigint() - startNs) };
  }

  awaitsLoad(modelName: string): boolean {
    return this.control.awaitsLoad(modelName);
  }

  async awaitLoad(modelName: string, timeoutMs?: number): Promise<void> {
    if (this.control.awaitsLoad(modelName)) await this.control.loadForRequest(modelName, timeoutMs);
  }

  reserveRequestMemory(bodyBytes: number, target?: BodyTarget): MemoryReservation {
    const version = policyVersion(target?.modelVersion);
    const ready = target !== undefined && this.models.isModelReady(target.modelName, version);
    const model = ready ? this.models.resolve(target.modelName, version) : undefined;
    return this.memory.reserve(bodyBytes, model ? advanceChargeBytes(model, bodyBytes, target!.repliesAsJson) : 0);
  }

  admitElements(
    memory: MemoryReservation,
    target: { readonly modelName: string; readonly modelVersion?: string },
    census: ElementCensus,
  ): void {
    checkElementCount(census.elements, this.maxRequestElements);
    // A request for a model that is not ready gets that error from infer(), as it always did.
    const version = policyVersion(target.modelVersion);
    if (this.models.isModelReady(target.modelName, version)) {
      const model = this.models.resolve(target.modelName, version);
      for (const input of census.inputs) checkInputElements(model, input.name, input.elements);
      // Strings sent to a model without BYTES inputs are refused as such once decoded.
      if (census.stringElements > 0 && model.inputs.some((i) => i.datatype === 'BYTES')) {
        checkStringElements(model, census.stringElements, census.stringBytes);
      }
    }
    try {
      memory.grow(census.decodeBytes);
    } catch (error) {
      const e = toInferenceServerError(error);
      throw e.code === 'RESOURCE_EXHAUSTED'
        ? Errors.overMemoryBudget(
            `decoding the request's ${census.elements} elements would take about ${census.decodeBytes} bytes: ${e.message}`,
          )
        : e;
    }
  }

  statistics(modelName?: string, modelVersion?: string): ModelStatistics[] {
    if (modelName === undefined || modelName === '') {
      return this.models.loadedVersions().map((v) => v.stats.snapshot());
    }
    const version = policyVersion(modelVersion);
    if (version !== undefined) return [this.models.resolve(modelName, version).stats.snapshot()];
    if (!this.models.isKnown(modelName)) throw Errors.unknownModel(modelName);
    return this.models
      .loadedVersions()
      .filter((v) => v.modelName === modelName)
      .map((v) => v.stats.snapshot());
  }

  repositoryIndex(readyOnly: boolean): RepositoryIndexEntry[] {
    return this.models.index(readyOnly);
  }

  loadModel(modelName: string, parameters: LoadParameters = {}): Promise<void> {
    return this.control.load(modelName, parameters);
  }

  unloadModel(modelName: string, options: UnloadOptions = {}): Promise<void> {
    return this.control.unload(modelName, options);
  }

  registerSystemSharedMemory(name: string, key: string, offset: number, byteSize: number): Promise<void> {
    return this.sharedMemory.register(name, key, offset, byteSize);
  }

  unregisterSystemSharedMemory(name?: string): Promise<void> {
    return this.sharedMemory.unregister(name);
  }

  systemSharedMemoryStatus(name?: string): SharedMemoryRegionStatus[] {
    return this.sharedMemory.status(name);
  }

  cudaSharedMemoryStatus(name?: string): never[] {
    return this.sharedMemory.cudaStatus(name);
  }

  logSettings(): LogSettings {
    return currentLogSettings(this.logger);
  }

  updateLogSettings(update: Readonly<Record<string, unknown>>): LogSettings {
    return updateLogSettings(this.logger, update);
  }

  traceSettings(modelName?: string): TraceSettings {
    if (modelName) this.assertKnown(modelName);
    return this.tracer.settings(modelName || undefined);
  }

  updateTraceSettings(update: TraceSettingsUpdate, modelName?: string): TraceSettings {
    if (modelName) this.assertKnown(modelName);
    return this.tracer.update(update, modelName || undefined);
  }

  private assertKnown(modelName: string): void {
    if (!this.models.isKnown(modelName)) throw Errors.unknownModel(modelName);
  }
}

/**
 * The version a request names, or undefined for the version policy's choice (the highest ready
 * version), which the empty string also means (what gRPC carries when a client names no version).
 * The one place that decides it; frontends pass what the client sent.
 */
function policyVersion(modelVersion: string | undefined): string | undefined {
  return modelVersion === '' ? undefined : modelVersion;
}

/** How long a request waits for its model to load (--load-on-demand): its `timeout` parameter (microseconds) if it has one. */
function loadWaitMs(request: InferenceRequest): number | undefined {
  const timeout = request.parameters['timeout'];
  return typeof timeout === 'number' && timeout > 0 ? timeout / 1000 : undefined;
}

/** A request's canary stickiness keys: the header (gRPC metadata) and the `canary_key` parameter. */
function routeKeysOf(request: InferenceRequest): RouteKeys {
  const parameter = request.parameters[CANARY_KEY_PARAMETER];
  return { header: request.canaryKey, parameter: typeof parameter === 'string' ? parameter : undefined };
}

/** Where a decoupled model's responses go: each made a response of the request, into its stream. */
function streamSink(stream: ResponseQueue, respond: (tensors: Tensor[]) => InferenceResponse): ResponseSink {
  stream.decoupled = true;
  return {
    send: (response, final) =>
      stream.push(
        response === undefined
          ? { kind: 'final' }
          : 'error' in response
            ? { kind: 'error', error: toInferenceServerError(response.error), final }
            : { kind: 'response', response: respond(response.outputs), final },
      ),
  };
}

/** Whether any of the request's inputs or outputs is in shared memory. */
function usesSharedMemory(request: InferenceRequest): boolean {
  for (const input of request.inputs) if (input.sharedMemory) return true;
  if (request.outputs) for (const output of request.outputs) if (output.sharedMemory) return true;
  return false;
}

/** The response of `request` from `model` with these outputs. */
function responseOf(request: InferenceRequest, model: LoadedVersion, outputs: readonly Tensor[]): InferenceResponse {
  const response = { modelName: model.modelName, modelVersion: model.version, outputs: outputs as Tensor[] };
  if (request.id !== undefined) (response as { id?: string }).id = request.id;
  const parameters = responseParametersOf(outputs);
  if (parameters !== undefined) (response as { parameters?: Parameters }).parameters = parameters;
  return response;
}

/** The outputs as the request asked for them: selected, reshaped, and those asked as classifications classified. */
function finishOutputs(model: LoadedVersion, validated: ValidatedRequest, tensors: Tensor[]): Tensor[] {
  const selected = selectOutputs(model, tensors, validated.outputNames);
  if (validated.classifications.size === 0) return selected;
  return selected.map((tensor) => {
    const count = validated.classifications.get(tensor.name);
    if (count === undefined) return tensor;
    return classify(tensor, count, model.outputsByName.get(tensor.name)!.labels, model.maxBatchSize > 0);
  });
}

/** The asked-for outputs, in the order asked, shaped as the config declares them (reshape). */
function selectOutputs(model: LoadedVersion, all: Tensor[], names: readonly string[]): Tensor[] {
  // Outputs are few: a linear search allocates nothing.
  const tensorNamed = (name: string): Tensor | undefined => {
    for (const tensor of all) if (tensor.name === name) return tensor;
    return undefined;
  };
  return names.map((name) => {
    const tensor = tensorNamed(name);
    if (!tensor) throw Errors.internal(`model '${model.modelName}' produced no output '${name}'`);
    const spec = model.outputsByName.get(name)!;
    if (!spec.modelDims) return tensor;
    return { ...tensor, shape: reshapeDims(tensor.shape, spec.modelDims, spec.dims, model.maxBatchSize > 0) };
  });
}
