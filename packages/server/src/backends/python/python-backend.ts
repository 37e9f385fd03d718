import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { modelConfigToJson } from '../../config/to-json.ts';
import type { ModelConfig } from '../../config/model-config.ts';
import type { ModelIO } from '../../config/model-io.ts';
import { isDecoupled } from '../../config/transaction-policy.ts';
import { Errors } from '../../errors/errors.ts';
import type { Backend, InstanceModelContext, InstanceOptions, LoadedInstance } from '../backend.ts';
import { visibleGpuIds } from '../gpu-detect.ts';
import { DEFAULT_EXECUTE_TIMEOUT_MS, EXECUTE_TIMEOUT_PARAMETER, ioOfConfig, positiveMs } from '../js/js-backend.ts';
import { DEFAULT_FINAL_RESPONSE_TIMEOUT_MS, FINAL_RESPONSE_TIMEOUT_PARAMETER } from '../js/live-requests.ts';
import type { RestartBackoff } from '../worker-supervision.ts';
import { pythonPlacement } from './gpu-placement.ts';
import { processGpuBytes } from './gpu-process-memory.ts';
import { interpreterFor, type Interpreter } from './interpreter.ts';
import type { PythonModelMetrics } from './model-metrics.ts';
import type { FromStub, InitializeArgs, ToStub } from './protocol.ts';
import { PythonInstance } from './python-instance.ts';
import { DEFAULT_SHM_BYTES, DEFAULT_SHM_GROWTH_BYTES } from './shm-regions.ts';
import { StubProcess, type StubMessage } from './stub-process.ts';

export interface PythonBackendOptions {
  readonly logger: Logger;
  /** Where the models' custom metrics (pb_utils.MetricFamily) and their processes' deaths are counted. */
  readonly metrics: PythonModelMetrics;
  /** Triton's `--backend-config=python,shm-default-byte-size=N`. @default 1 MiB */
  readonly shmDefaultBytes?: number;
  /** Triton's `--backend-config=python,shm-growth-byte-size=N`. @default 1 MiB */
  readonly shmGrowthBytes?: number;
  /** The interpreter of models without EXECUTION_ENV_PATH. @default - $BATCHWISE_PYTHON, else /usr/bin/python3, else python3 */
  readonly python?: string;
  /** Waits before a dead process is restarted. @default 100 ms, doubling to 10 s */
  readonly restartBackoff?: RestartBackoff;
  /**
   * CUDA ordinals of the GPUs this process sees, where KIND_GPU instances may run.
   * @default - backends/gpu-detect.ts's visibleGpuIds(), read when the backend is created
   */
  readonly visibleGpuIds?: readonly number[];
}

const DEFAULT_BACKOFF: RestartBackoff = { firstMs: 100, maxMs: 10_000 };

/** How long a stub may take to start and initialize its model. */
const LOAD_TIMEOUT_MS = 120_000;

/**
 * Triton's Python backend (`backend: "python"`): a repository's model.py files, unchanged, each
 * instance in its own Python process (stub/stub.py speaking protocol.ts).
 */
export function createPythonBackend(options: PythonBackendOptions): Backend {
  const gpus = options.visibleGpuIds ?? visibleGpuIds();
  return {
    name: 'python',
    runsModelCode: true,
    configDeclaresTensors: true,
    completeConfig: (config, modelFile, context) => completeConfig(config, modelFile, context, options),
    createInstance: (instanceOptions) => createInstance(instanceOptions, options, gpus),
  };
}

function settingsOf(options: PythonBackendOptions) {
  return {
    shmDefaultBytes: options.shmDefaultBytes ?? DEFAULT_SHM_BYTES,
    shmGrowthBytes: options.shmGrowthBytes ?? DEFAULT_SHM_GROWTH_BYTES,
  };
}

/** The init message of a stub for this model and instance. */
function initMessage(
  mode: 'serve' | 'auto-complete',
  stub: StubProcess,
  config: ModelConfig,
  modelFile: string,
  context: InstanceModelContext,
  deviceId: number,
  shmGrowthBytes: number,
): ToStub {
  const json = modelConfigToJson(config) as Record<string, unknown>;
  const args: InitializeArgs = {
    model_config: JSON.stringify(json),
    // TRITONSERVER_InstanceGroupKindString: 'CPU', 'GPU'.
    model_instance_kind: context.kind.replace('KIND_', ''),
    model_instance_name: context.instanceName,
    model_instance_device_id: String(deviceId),
    model_repository: context.modelDir,
    model_version: context.version,
    model_name: config.name,
  };
  return {
    t: 'init',
    mode,
    modelFile,
    paths: [context.versionDir, context.modelDir],
    args,
    config: json,
    decoupled: isDecoupled(config),
    inPath: stub.regions.inPath,
    outPath: stub.regions.outPath,
    shmGrowthBytes,
  };
}

/** Starts a stub and sends its init message. */
function startStub(
  mode: 'serve' | 'auto-complete',
  interpreter: Interpreter,
  config: ModelConfig,
  modelFile: string,
  context: InstanceModelContext,
  deviceId: number,
  options: PythonBackendOptions,
): StubProcess {
  const settings = settingsOf(options);
  const logger = options.logger.child({ model: config.name, instance: context.instanceName || undefined });
  const stub = new StubProcess({ python: interpreter.python, env: interpreter.env, ...settings, logger });
  // From its first message on: initialize() logs and declares metric families before the model is ready.
  stub.on('message', ({ message }: StubMessage) => {
    if (message.t === 'log') logModelLine(logger, message);
    else if (message.t === 'metric-family' || message.t === 'metric') options.metrics.customMetric(message);
  });
  stub.postMessage(initMessage(mode, stub, config, modelFile, context, deviceId, settings.shmGrowthBytes));
  return stub;
}

/**
 * Resolves with the stub's first answer of the kinds `want` names; rejects with the model's own error
 * (`load-failed`), or how the process died before answering, or after LOAD_TIMEOUT_MS.
 */
function firstAnswer<T extends FromStub['t']>(stub: StubProcess, want: T): Promise<Extract<FromStub, { t: T }>> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      clearTimeout(timer);
      stub.off('message', onMessage);
      stub.off('error', onError);
    };
    const timer = setTimeout(() => {
      cleanup();
      void stub.terminate();
      reject(new Error(`the Python process did not finish loading within ${LOAD_TIMEOUT_MS / 1000} s`));
    }, LOAD_TIMEOUT_MS);
    const onError = (error: Error) => {
      cleanup();
      reject(new Error(`the Python process ${error.message} before the model was loaded`));
    };
    const onMessage = ({ message }: StubMessage) => {
      if (message.t === 'load-failed') {
        cleanup();
        void stub.terminate();
        reject(new Error(message.message));
      } else if (message.t === want) {
        cleanup();
        resolve(message as Extract<FromStub, { t: T }>);
      }
    };
    stub.on('message', onMessage);
    stub.on('error', onError);
  });
}

/** Resolves once the stub's model is initialized; the regions' names go then (both processes hold them open). */
async function untilReady(stub: StubProcess): Promise<StubProcess> {
  await firstAnswer(stub, 'ready');
  stub.regions.unlink();
  return stub;
}

/**
 * Triton's auto-complete of a Python model: the model's `auto_complete_config(config)`, when its file
 * defines one, run in a process of its own before any instance starts. Returns the config it made.
 */
async function completeConfig(
  config: ModelConfig,
  modelFile: string,
  context: InstanceModelContext,
  options: PythonBackendOptions,
): Promise<Record<string, unknown> | undefined> {
  if (!(await readFile(modelFile, 'utf8')).includes('auto_complete_config')) return undefined;
  const interpreter = await interpreterFor(config, context.modelDir, options.logger);
  const stub = startStub('auto-complete', interpreter, config, modelFile, context, 0, options);
  try {
    return (await firstAnswer(stub, 'completed')).config;
  } catch (error) {
    throw Errors.invalidArg(`model '${config.name}' (backend python): auto_complete_config failed: ${(error as Error).message}`);
  } finally {
    void stub.terminate();
  }
}

async function createInstance(
  instanceOptions: InstanceOptions,
  options: PythonBackendOptions,
  gpus: readonly number[],
): Promise<LoadedInstance> {
  const given = instanceOptions.model;
  if (!given) throw Errors.internal(`model '${instanceOptions.modelName}': the python backend needs the model's config and folders`);
  const { config } = given;
  // Before a process starts: a KIND_GPU instance needs its GPU visible (or --allow-cpu-fallback).
  const { device, deviceId, allowCpuFallback } = instanceOptions;
  const placement = pythonPlacement({ config, instanceName: given.instanceName, device, deviceId, allowCpuFallback }, gpus);
  const context: InstanceModelContext = { ...given, kind: placement.kind };
  const timeoutMs = positiveMs(config, EXECUTE_TIMEOUT_PARAMETER, DEFAULT_EXECUTE_TIMEOUT_MS);
  const finalResponseTimeoutMs = positiveMs(config, FINAL_RESPONSE_TIMEOUT_PARAMETER, DEFAULT_FINAL_RESPONSE_TIMEOUT_MS);
  const interpreter = await interpreterFor(config, context.modelDir, options.logger);
  const logger = options.logger.child({ model: config.name, instance: context.instanceName });
  const spawn = () => startStub('serve', interpreter, config, instanceOptions.modelPath, context, placement.deviceId, options);
  let first: StubProcess;
  try {
    first = await untilReady(spawn());
  } catch (error) {
    throw Errors.invalidArg(`model '${config.name}' (backend python): ${(error as Error).message}`);
  }
  const instance = new PythonInstance(first, {
    modelName: config.name,
    instanceName: context.instanceName,
    config,
    timeoutMs,
    decoupled: isDecoupled(config),
    finalResponseTimeoutMs,
    callModel: instanceOptions.callModel,
    streamModel: instanceOptions.streamModel,
    spawn,
    load: untilReady,
    backoff: options.restartBackoff ?? DEFAULT_BACKOFF,
    onDeath: (how) => {
      options.metrics.processDied(config.name, context.version);
      logger.error({ reason: how }, 'Python model process died; its in-flight requests failed and it is restarted');
    },
  });
  const io: ModelIO = ioOfConfig(config);
  const processBytes = await residentBytes(first.pid);
  const gpuProcessBytes = placement.kind === 'KIND_GPU' ? await processGpuBytes(first.pid) : undefined;
  if (placement.kind === 'KIND_GPU') {
    logger.info({ gpu: placement.deviceId, pid: first.pid, gpuProcessBytes }, 'KIND_GPU Python instance initialized');
  }
  return {
    instance,
    io,
    executionProvider: 'python',
    ...(processBytes !== undefined && { processBytes }),
    ...(gpuProcessBytes !== undefined && { gpuProcessBytes }),
    ...(placement.fallbackReason !== undefined && { fallbackReason: placement.fallbackReason }),
  };
}

/** A pb_utils.Logger line, at its level, with where in the model's code it was written. */
function logModelLine(logger: Logger, message: Extract<FromStub, { t: 'log' }>): void {
  const where = message.file === undefined ? {} : { file: message.file, line: message.line };
  switch (message.level) {
    case 'error':
      logger.error(where, message.message);
      return;
    case 'warn':
      logger.warn(where, message.message);
      return;
    case 'verbose':
      logger.debug(where, message.message);
      return;
    default:
      logger.info(where, message.message);
  }
}

/** A process's resident set (VmRSS of /proc/<pid>/status), bytes; undefined where /proc cannot tell. */
async function residentBytes(pid: number | undefined): Promise<number | undefined> {
  if (pid === undefined) return undefined;
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}
