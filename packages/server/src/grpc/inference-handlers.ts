import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { Errors, type InferenceService } from '../core/index.ts';
import { decodeInferRequest, encodeInferResponse, SHARED_MEMORY_UNSUPPORTED } from './infer-codec.ts';
import { currentLogSettings, toLogSettingsWire, updateLogSettings } from './log-settings.ts';
import { toModelStatisticsWire } from './statistics.ts';
import { streamInferHandler, type DrainableStream } from './stream-infer.ts';
import { unary } from './unary.ts';
import type { LogSettingValueWire, ModelInferRequestWire, ModelRepositoryParameterWire } from './wire-types.ts';

interface NameVersion {
  name: string;
  version: string;
}

interface RepositoryModelRequest {
  repository_name: string;
  model_name: string;
  parameters: Record<string, ModelRepositoryParameterWire>;
}

/** Every RPC of inference.GRPCInferenceService, implemented on the shared InferenceService. */
export function inferenceServiceHandlers(
  service: InferenceService,
  streams: Set<DrainableStream>,
  logger: Logger,
): UntypedServiceImplementation {
  const notSupported = (method: string, message: string) =>
    unary(method, logger, () => {
      throw Errors.unsupported(message);
    });
  const version = (v: string) => (v === '' ? undefined : v);

  return {
    ServerLive: unary('ServerLive', logger, () => ({ live: service.isLive() })),
    ServerReady: unary('ServerReady', logger, () => ({ ready: service.isReady() })),
    ModelReady: unary('ModelReady', logger, (r: NameVersion) => ({
      ready: service.isModelReady(r.name, version(r.version)),
    })),
    ServerMetadata: unary('ServerMetadata', logger, () => service.serverMetadata()),
    ModelMetadata: unary('ModelMetadata', logger, (r: NameVersion) => {
      const m = service.modelMetadata(r.name, version(r.version));
      return { name: m.name, versions: m.versions, platform: m.platform, inputs: m.inputs, outputs: m.outputs };
    }),
    ModelConfig: unary('ModelConfig', logger, (r: NameVersion) => ({
      config: service.modelConfig(r.name, version(r.version)),
    })),
    ModelInfer: unary('ModelInfer', logger, async (r: ModelInferRequestWire) =>
      encodeInferResponse(await service.infer(decodeInferRequest(r))),
    ),
    ModelStreamInfer: streamInferHandler(service, streams, logger),
    ModelStatistics: unary('ModelStatistics', logger, (r: NameVersion) => ({
      model_stats: service.statistics(r.name || undefined, version(r.version)).map(toModelStatisticsWire),
    })),
    RepositoryIndex: unary('RepositoryIndex', logger, (r: { ready: boolean }) => ({
      models: service.repositoryIndex(r.ready).map((e) => ({
        name: e.name,
        version: e.version ?? '',
        state: e.state ?? '',
        reason: e.reason ?? '',
      })),
    })),
    RepositoryModelLoad: unary('RepositoryModelLoad', logger, async (r: RepositoryModelRequest) => {
      await service.loadModel(r.model_name, loadOptions(r.parameters));
      return {};
    }),
    RepositoryModelUnload: unary('RepositoryModelUnload', logger, async (r: RepositoryModelRequest) => {
      const dependents = r.parameters['unload_dependents'];
      await service.unloadModel(r.model_name, { unloadDependents: dependents?.bool_param === true });
      return {};
    }),
    SystemSharedMemoryStatus: notSupported('SystemSharedMemoryStatus', SHARED_MEMORY_UNSUPPORTED),
    SystemSharedMemoryRegister: notSupported('SystemSharedMemoryRegister', SHARED_MEMORY_UNSUPPORTED),
    SystemSharedMemoryUnregister: notSupported('SystemSharedMemoryUnregister', SHARED_MEMORY_UNSUPPORTED),
    CudaSharedMemoryStatus: notSupported('CudaSharedMemoryStatus', SHARED_MEMORY_UNSUPPORTED),
    CudaSharedMemoryRegister: notSupported('CudaSharedMemoryRegister', SHARED_MEMORY_UNSUPPORTED),
    CudaSharedMemoryUnregister: notSupported('CudaSharedMemoryUnregister', SHARED_MEMORY_UNSUPPORTED),
    TraceSetting: notSupported(
      'TraceSetting',
      'tracing is not supported by Batchwise; latency histograms are on the metrics endpoint',
    ),
    LogSettings: unary('LogSettings', logger, (r: { settings: Record<string, LogSettingValueWire> }) => ({
      settings: toLogSettingsWire(
        Object.keys(r.settings).length > 0 ? updateLogSettings(logger, r.settings) : currentLogSettings(logger),
      ),
    })),
  };
}

function loadOptions(parameters: Record<string, ModelRepositoryParameterWire>): { config?: string } {
  for (const key of Object.keys(parameters)) {
    if (key.startsWith('file:')) throw Errors.unsupported(`model file override '${key}' is not supported by Batchwise`);
  }
  const config = parameters['config'];
  if (config === undefined) return {};
  if (config.parameter_choice !== 'string_param') throw Errors.invalidArg(`load parameter 'config' must be a string (JSON model config)`);
  return { config: config.string_param ?? '' };
}
