import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Backend, InstanceDevice, LoadedInstance, ModelInstance } from '../backends/backend.ts';
import { sessionSettingsFromConfig } from '../backends/session-settings.ts';
import { autoCompleteModelConfig, configPaths, normalizeModelConfig, parseModelConfig, validateModelConfig } from '../config/index.ts';
import type { ModelConfig, ModelInstanceGroup } from '../config/model-config.ts';
import { VersionStatistics } from '../metrics/version-statistics.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';
import type { ModelFolder } from '../repository/model-folder.ts';
import { fileErrorText, folderOf, resolveInModelFolder } from '../repository/model-paths.ts';
import { createScheduler, latencyObjectiveNs, type WarmupRun } from '../scheduler/index.ts';
import type { ExecutionGate, InstanceClaim, RateLimiter } from '../scheduler/rate-limiter.ts';
import { stringHeapCapacityBytes } from '../memory/element-cost.ts';
import { modelFootprint, workerShareOf, type ModelFootprint } from '../memory/model-footprint.ts';
import type { MemoryReservation } from '../memory/memory-guard.ts';
import type { ModelMemoryHold, ModelResidency } from './model-residency.ts';
import { Errors } from '../errors/errors.ts';
import type { InferenceCall, InferenceStreamCall } from '../protocol/types.ts';
import { warmUp } from './warmup.ts';
import { chooseBackend, modelFileOf, requireDeclaredTensors, withBackendOfFiles } from './backend-choice.ts';
import { configFromJson } from './config-override.ts';
import type { LoadedVersion } from './loaded-version.ts';
import { inputSpecsOf, outputSpecsOf, tensorTables } from './tensor-specs.ts';

export interface LoaderOptions {
  /** The backends a config's `backend` names (onnxruntime, js). */
  readonly backends: readonly Backend[];
  readonly metrics: ServerMetrics;
  readonly logger: Logger;
  readonly strictModelConfig: boolean;
  readonly allowCpuFallback: boolean;
  readonly gpuIds: readonly number[];
  /** Host memory the budget has left; a version that would not fit fails to load instead. */
  readonly freeMemoryBytes?: () => number;
  /**
   * Runs an inference through the server's own request path (core's InferenceService): an
   * ensemble's steps and a JavaScript model's calls to other models go through it. Bound by
   * the server once the service exists; undefined where nothing can be called (unit tests).
   */
  readonly callModel?: InferenceCall;
  /** callModel as a stream of responses: an ensemble's decoupled steps go through it. */
  readonly streamModel?: InferenceStreamCall;
  /** The server's rate limiter (--rate-limit=execution_count); absent when off. */
  readonly rateLimiter?: RateLimiter;
  /** What loaded versions take against --model-memory-limit: a load makes room there first (evicting). @default - no limit */
  readonly residency?: Pick<ModelResidency, 'reserve'>;
  /** Charges what sequences' implicit states hold to the memory budget (throws when over it). @default - not charged */
  readonly reserveMemory?: (bytes: number) => MemoryReservation;
}

/** The model's config as written (parsed, not yet completed); undefined when there is no config.pbtxt. */
export function readConfig(folder: ModelFolder, options: Pick<LoaderOptions, 'strictModelConfig'>): ModelConfig | undefined {
  if (folder.configText === undefined) {
    if (options.strictModelConfig) {
      throw Errors.invalidArg(`model '${folder.name}' has no config.pbtxt; it is required with --strict-model-config=true`);
    }
    return undefined;
  }
  const config = parseModelConfig(folder.configText, folder.configPath);
  if (config.name !== '' && config.name !== folder.name) {
    throw Errors.invalidArg(`model '${folder.name}': config.pbtxt names the model '${config.name}', which must match its folder name`);
  }
  return { ...config, name: folder.name };
}

/** Loads one version: first instance, then config completion and validation, then the rest. */
export async function loadVersion(
  folder: ModelFolder,
  written: ModelConfig | undefined,
  version: number,
  options: LoaderOptions,
): Promise<LoadedVersion> {
  const normalizeOptions = { visibleGpuIds: options.gpuIds };
  const declared = normalizeModelConfig(
    await withBackendOfFiles(written ?? emptyConfig(folder.name), folder.dir, version),
    normalizeOptions,
  );
  await checkConfigPaths(folder, declared, version);
  const backend = chooseBackend(declared, options.backends);
  const modelPath = await modelFileOf(folder.dir, version, declared, backend);
  const base = await completedByModel(folder, declared, version, modelPath, backend, options);
  requireDeclaredTensors(base, backend);
  const labels = await readLabels(folder, base);
  const settings = sessionSettingsFromConfig(base);
  const placements = instancePlacements(base.instance_group ?? []);
  const weightsBytes = (await stat(modelPath)).size;
  // Room under --model-memory-limit first (evicting), then the memory budget's check.
  const footprint = modelFootprint(weightsBytes, placements, backend.name === 'onnxruntime');
  const phase = (name: 'room' | 'session', startedMs: number) =>
    options.metrics.modelLoadDurationByPhase.observe({ phase: name }, (performance.now() - startedMs) / 1000);
  const roomStarted = performance.now();
  const hold = await options.residency?.reserve(folder.name, String(version), footprint);
  if (options.residency) phase('room', roomStarted);
  try {
    checkFootprint(folder.name, version, footprint, options);
    const sessionStarted = performance.now();
    const { loaded, onEventLoop, measuredGpuBytes } = await openVersion(folder, written, version, options, {
      base,
      backend,
      modelPath,
      labels,
      settings,
      placements,
    });
    phase('session', sessionStarted);
    if (hold) {
      // An instance on the event loop closed the worker it loaded in: its share of the footprint is free again.
      hold.giveBack(workerShareOf(onEventLoop));
      // A process on a GPU (a Python model) is held as measured: no estimate before it started.
      hold.holdMeasuredGpu(measuredGpuBytes);
      releaseWhenClosed(loaded.instances, hold);
    }
    return loaded;
  } catch (error) {
    hold?.release();
    throw error;
  }
}

/** What loadVersion decided before any instance opens. */
interface VersionPlan {
  readonly base: ModelConfig;
  readonly backend: Backend;
  readonly modelPath: string;
  readonly labels: Map<string, readonly string[]>;
  readonly settings: ReturnType<typeof sessionSettingsFromConfig>;
  readonly placements: readonly Placement[];
}

/**
 * Opens the instances (the first, then config completion and validation, then the rest) and warms
 * them up; says how many of them run on the event loop (no worker thread).
 */
async function openVersion(
  folder: ModelFolder,
  written: ModelConfig | undefined,
  version: number,
  options: LoaderOptions,
  { base, backend, modelPath, labels, settings, placements }: VersionPlan,
): Promise<{ loaded: LoadedVersion; onEventLoop: number; measuredGpuBytes: ReadonlyMap<number, number> }> {
  const normalizeOptions = { visibleGpuIds: options.gpuIds };
  // Before any instance starts: a config asking for more than the command line gives fails here.
  const gate = options.rateLimiter?.register(folder.name, String(version), placements.map(claimOf));
  const create = (placement: Placement) =>
    backend.createInstance({
      modelName: folder.name,
      modelPath,
      device: placement.device,
      deviceId: placement.deviceId,
      allowCpuFallback: options.allowCpuFallback,
      sessionOptions: settings,
      model: {
        config: base,
        version: String(version),
        modelDir: folder.dir,
        versionDir: join(folder.dir, String(version)),
        instanceName: placement.instanceName,
        kind: placement.device === 'gpu' ? 'KIND_GPU' : 'KIND_CPU',
      },
      ...(options.callModel && { callModel: options.callModel }),
      ...(options.streamModel && { streamModel: options.streamModel }),
    });

  const first = await create(placements[0]!);
  const created: LoadedInstance[] = [first];
  try {
    // A JavaScript or Python model's config is complete as written or as its model completed it (its io is the config's own).
    const completed =
      options.strictModelConfig || backend.configDeclaresTensors ? base : autoCompleteModelConfig(written, first.io, folder.name);
    const config = normalizeModelConfig(completed, normalizeOptions);
    validateModelConfig(config, first.io);
    latencyObjectiveNs(config); // throws on a bad batchwise_latency_objective_ms before more instances load
    const initialStateFiles = await readInitialStates(folder, config);
    created.push(...(await Promise.all(placements.slice(1).map(create))));
    const warmupRuns = await warmUp(
      config,
      folder.dir,
      created.map((c) => c.instance),
      config.output.map((o) => o.name),
    );
    if (first.eventLoopRunUs !== undefined) {
      options.logger.info(
        { model: folder.name, version: String(version), fullBatchUs: first.eventLoopRunUs },
        'instance runs on the event loop: a full batch takes less than a hand-off to a worker (batchwise_event_loop_run_us)',
      );
    }
    if (first.fallbackReason) {
      options.logger.warn(
        { model: folder.name, version, reason: first.fallbackReason },
        'KIND_GPU model runs on CPU (--allow-cpu-fallback)',
      );
    }
    const unapplied = backend.unappliedSettings?.(settings) ?? {};
    for (const [parameter, why] of Object.entries(unapplied)) options.logger.warn({ model: folder.name, version, parameter }, why);
    const loaded = assemble(folder.name, String(version), config, created, options, {
      unapplied,
      labels,
      gate,
      warmupRuns,
      initialStateFiles,
    });
    const measuredGpuBytes = new Map<number, number>();
    created.forEach((c, i) => {
      const deviceId = placements[i]!.deviceId;
      if (c.gpuProcessBytes !== undefined) measuredGpuBytes.set(deviceId, (measuredGpuBytes.get(deviceId) ?? 0) + c.gpuProcessBytes);
    });
    return { loaded, onEventLoop: created.filter((c) => c.eventLoopRunUs !== undefined).length, measuredGpuBytes };
  } catch (error) {
    gate?.close();
    await Promise.all(created.map((c) => c.instance.close()));
    throw error;
  }
}

/**
 * The config as the model's own code completes it (a Python model's auto_complete_config), normalized;
 * the declared config where the backend has no such step, the model adds nothing, or
 * --strict-model-config=true (Triton then skips auto-complete too).
 */
async function completedByModel(
  folder: ModelFolder,
  declared: ModelConfig,
  version: number,
  modelPath: string,
  backend: Backend,
  options: LoaderOptions,
): Promise<ModelConfig> {
  if (!backend.completeConfig || options.strictModelConfig) return declared;
  const completed = await backend.completeConfig(declared, modelPath, {
    config: declared,
    version: String(version),
    modelDir: folder.dir,
    versionDir: join(folder.dir, String(version)),
    instanceName: '',
    kind: 'KIND_CPU',
  });
  if (!completed) return declared;
  return normalizeModelConfig(configFromJson(folder.name, JSON.stringify(completed)), { visibleGpuIds: options.gpuIds });
}

/** Gives the version's memory hold back once its last instance has closed (retired and drained). */
function releaseWhenClosed(instances: readonly ModelInstance[], hold: ModelMemoryHold): void {
  let open = instances.length;
  for (const instance of instances) {
    const close = instance.close.bind(instance);
    let closed = false;
    instance.close = async () => {
      try {
        await close();
      } finally {
        if (!closed) {
          closed = true;
          if (--open === 0) hold.release();
        }
      }
    };
  }
}

/**
 * A version needs its footprint of host memory (modelFootprint: each CPU session's copy of the
 * weights, each instance's worker thread). A version that would not fit in what the memory budget
 * has left fails to load with the figures, rather than starving the models already serving.
 */
function checkFootprint(model: string, version: number, footprint: ModelFootprint, options: LoaderOptions): void {
  if (!options.freeMemoryBytes) return;
  const free = options.freeMemoryBytes();
  if (footprint.hostBytes > free) {
    throw Errors.invalidArg(
      `model '${model}' version ${version} needs about ${footprint.hostBytes} bytes of host memory (${footprint.description}) ` +
        `but only ${Math.max(0, free)} bytes of the memory budget (--memory-limit) are free`,
    );
  }
}

interface Placement {
  readonly device: InstanceDevice;
  readonly deviceId: number;
  /** The group's name and the instance's index in it, as Triton names instances. */
  readonly instanceName: string;
  readonly rateLimiter?: ModelInstanceGroup['rate_limiter'];
}

/** What an instance asks of the rate limiter; a KIND_CPU instance counts as device 0, as in Triton. */
function claimOf(placement: Placement): InstanceClaim {
  const limiter = placement.rateLimiter;
  return {
    deviceId: placement.deviceId,
    resources: (limiter?.resources ?? []).map((r) => ({ name: r.name ?? '', global: r.global ?? false, count: r.count ?? 0 })),
    priority: limiter?.priority ?? 0,
  };
}

/**
 * One entry per instance: `count` instances on each GPU of a KIND_GPU group (normalization
 * lists every visible GPU when the config names none). With no GPU visible the group still
 * asks for CUDA device 0, so the backend fails it with the reason (or falls back when told to).
 */
function instancePlacements(groups: readonly ModelInstanceGroup[]): Placement[] {
  const placements: Placement[] = [];
  for (const group of groups) {
    const count = group.count ?? 1;
    if (group.kind === 'KIND_GPU') {
      const ids = group.gpus && group.gpus.length > 0 ? group.gpus : [0];
      let index = 0;
      for (const deviceId of ids) {
        for (let i = 0; i < count; i++) {
          placements.push({ device: 'gpu', deviceId, instanceName: `${group.name}_${index++}`, rateLimiter: group.rate_limiter });
        }
      }
    } else {
      for (let i = 0; i < count; i++) {
        placements.push({ device: 'cpu', deviceId: 0, instanceName: `${group.name}_${i}`, rateLimiter: group.rate_limiter });
      }
    }
  }
  return placements.length > 0 ? placements : [{ device: 'cpu', deviceId: 0, instanceName: '' }];
}

/**
 * Every path the config names (config/config-paths.ts) stays inside the model's folder, links
 * followed, before anything of the version is opened: else the load fails naming the field and
 * the path as written, whether the config comes from the repository or from a load request.
 */
export async function checkConfigPaths(folder: ModelFolder, config: ModelConfig, version: number): Promise<void> {
  for (const { field, path, under } of configPaths(config)) {
    await resolveInModelFolder(folder.dir, folderOf(under, version), path, `model '${folder.name}': ${field}`);
  }
}

/**
 * The data_file of each initial_state (sequence_batching.state), from `<model>/initial_state/`, by
 * state input name, read at load as Triton reads it (its paths were checked to stay in the folder).
 */
async function readInitialStates(folder: ModelFolder, config: ModelConfig): Promise<Map<string, Uint8Array>> {
  const files = new Map<string, Uint8Array>();
  for (const state of config.sequence_batching?.state ?? []) {
    const dataFile = state.initial_state?.[0]?.data_file;
    if (!dataFile || !state.input_name) continue;
    const what = `model '${folder.name}': data_file of initial_state '${state.initial_state![0]!.name ?? ''}'`;
    const path = await resolveInModelFolder(folder.dir, 'initial_state', dataFile, what);
    try {
      files.set(state.input_name, new Uint8Array(await readFile(path)));
    } catch (error) {
      throw Errors.invalidArg(`${what}: cannot read '${dataFile}': ${fileErrorText(error)}`);
    }
  }
  return files;
}

/** Each output's label_filename (in the model folder, one label per line), for the classification extension. */
export async function readLabels(folder: ModelFolder, config: ModelConfig): Promise<Map<string, readonly string[]>> {
  const labels = new Map<string, readonly string[]>();
  for (const output of config.output) {
    if (!output.label_filename) continue;
    const what = `model '${folder.name}': label_filename of output '${output.name}'`;
    const path = await resolveInModelFolder(folder.dir, '', output.label_filename, what);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      throw Errors.invalidArg(`${what}: cannot read '${output.label_filename}': ${fileErrorText(error)}`);
    }
    labels.set(output.name, text.split(/\r?\n/));
  }
  return labels;
}

function emptyConfig(name: string): ModelConfig {
  return { name, max_batch_size: 0, input: [], output: [] };
}

/** What openVersion found beside the instances, for the LoadedVersion. */
interface VersionExtras {
  readonly unapplied: Record<string, string>;
  readonly labels: ReadonlyMap<string, readonly string[]>;
  readonly gate: ExecutionGate | undefined;
  readonly warmupRuns: readonly WarmupRun[];
  readonly initialStateFiles: ReadonlyMap<string, Uint8Array>;
}

function assemble(
  modelName: string,
  version: string,
  config: ModelConfig,
  created: readonly LoadedInstance[],
  options: Pick<LoaderOptions, 'metrics' | 'reserveMemory'>,
  { unapplied: unappliedSettings, labels, gate, warmupRuns, initialStateFiles }: VersionExtras,
): LoadedVersion {
  const { metrics } = options;
  const runsWithout = new Set(created[0]!.io.inputs.filter((t) => t.optional).map((t) => t.name));
  const inputs = inputSpecsOf(config, runsWithout);
  const outputs = outputSpecsOf(config, labels);
  const instances: ModelInstance[] = created.map((c) => c.instance);
  const stats = new VersionStatistics(modelName, version, metrics);
  const outputNames = outputs.map((o) => o.name);
  const maxBatchStringHeapBytes = Math.min(...instances.map((i) => stringHeapCapacityBytes(i.heapLimitBytes)));
  const first = created[0]!;
  return {
    modelName,
    version,
    config,
    maxBatchSize: config.max_batch_size,
    ...tensorTables(inputs, outputs),
    instances,
    maxBatchStringHeapBytes,
    scheduler: createScheduler({
      config,
      instances,
      outputNames,
      stats,
      maxBatchStringHeapBytes,
      warmupRuns,
      ...(gate && { gate }),
      ...(options.reserveMemory && { reserveMemory: options.reserveMemory }),
      initialStateFiles,
    }),
    stats,
    executionProvider: first.executionProvider,
    fallbackReason: first.fallbackReason,
    unappliedSettings,
  };
}
