import type { Logger } from 'pino';
import {
  Errors,
  parseTraceSettingsUpdate,
  traceSettingsToWire,
  type InferenceService,
  type LoadParameter,
  type LoadParameters,
  type LogSettings,
} from '../core/index.ts';
import { runInferMessage } from './infer-call.ts';
import { frameInferResponse } from './infer-response-writer.ts';
import type { MethodCodec } from './protos.ts';
import { toModelStatisticsWire } from './statistics.ts';
import { streamInferHandler, type DrainableStream } from './stream-infer.ts';
import { callContextOf } from './trace-metadata.ts';
import type { MethodHandler, ServerCall, UnaryMethod } from './transport/server-call.ts';
import { failCall, unary } from './unary.ts';
import type { LogSettingValueWire, ModelRepositoryParameterWire, WireLong } from './wire-types.ts';

interface NameVersion {
  name: string;
  version: string;
}

interface SharedMemoryRegisterRequest {
  name: string;
  key: string;
  offset: WireLong;
  byte_size: WireLong;
}

interface RepositoryModelRequest {
  repository_name: string;
  model_name: string;
  parameters: Record<string, ModelRepositoryParameterWire>;
}

/** Every RPC of inference.GRPCInferenceService, implemented on the shared InferenceService, by method name. */
export function inferenceServiceHandlers(
  service: InferenceService,
  streams: Set<DrainableStream>,
  logger: Logger,
  codecOf: (method: string) => MethodCodec,
): Record<string, MethodHandler> {
  const rpc = <Req, Res>(method: string, fn: (request: Req) => Res | Promise<Res>) => unary(method, codecOf(method), logger, fn);
  const notSupported = (method: string, error: () => Error) =>
    rpc(method, () => {
      throw error();
    });

  return {
    ServerLive: rpc('ServerLive', () => ({ live: service.isLive() })),
    ServerReady: rpc('ServerReady', () => ({ ready: service.isReady() })),
    ModelReady: rpc('ModelReady', (r: NameVersion) => ({
      ready: service.isModelReady(r.name, r.version),
    })),
    ServerMetadata: rpc('ServerMetadata', () => service.serverMetadata()),
    // With --load-on-demand, metadata and config load a model not loaded yet (awaitLoad), as over HTTP.
    ModelMetadata: rpc('ModelMetadata', async (r: NameVersion) => {
      await service.awaitLoad(r.name);
      const m = service.modelMetadata(r.name, r.version);
      return { name: m.name, versions: m.versions, platform: m.platform, inputs: m.inputs, outputs: m.outputs };
    }),
    ModelConfig: rpc('ModelConfig', async (r: NameVersion) => {
      await service.awaitLoad(r.name);
      return { config: service.modelConfig(r.name, r.version) };
    }),
    ModelInfer: modelInfer(service, logger),
    ModelStreamInfer: streamInferHandler(service, streams, logger),
    ModelStatistics: rpc('ModelStatistics', (r: NameVersion) => ({
      model_stats: service.statistics(r.name, r.version).map(toModelStatisticsWire),
    })),
    RepositoryIndex: rpc('RepositoryIndex', (r: { ready: boolean }) => ({
      models: service.repositoryIndex(r.ready).map((e) => ({
        name: e.name,
        version: e.version ?? '',
        state: e.state ?? '',
        reason: e.reason ?? '',
      })),
    })),
    RepositoryModelLoad: rpc('RepositoryModelLoad', async (r: RepositoryModelRequest) => {
      await service.loadModel(r.model_name, loadParametersOf(r.parameters));
      return {};
    }),
    RepositoryModelUnload: rpc('RepositoryModelUnload', async (r: RepositoryModelRequest) => {
      await service.unloadModel(r.model_name, { unloadDependents: unloadDependentsOf(r.parameters) });
      return {};
    }),
    SystemSharedMemoryStatus: rpc('SystemSharedMemoryStatus', (r: { name: string }) => ({
      regions: Object.fromEntries(service.systemSharedMemoryStatus(r.name).map((region) => [region.name, region])),
    })),
    SystemSharedMemoryRegister: rpc('SystemSharedMemoryRegister', async (r: SharedMemoryRegisterRequest) => {
      await service.registerSystemSharedMemory(r.name, r.key, Number(r.offset), Number(r.byte_size));
      return {};
    }),
    SystemSharedMemoryUnregister: rpc('SystemSharedMemoryUnregister', async (r: { name: string }) => {
      await service.unregisterSystemSharedMemory(r.name);
      return {};
    }),
    // No CUDA region is ever registered: the status lists none, and unregistering has nothing to do (InferenceService).
    CudaSharedMemoryStatus: rpc('CudaSharedMemoryStatus', (r: { name: string }) => {
      service.cudaSharedMemoryStatus(r.name);
      return { regions: {} };
    }),
    CudaSharedMemoryRegister: notSupported('CudaSharedMemoryRegister', Errors.cudaSharedMemoryUnsupported),
    CudaSharedMemoryUnregister: rpc('CudaSharedMemoryUnregister', () => ({})),
    TraceSetting: rpc('TraceSetting', (r: { settings: Record<string, { value: string[] }>; model_name: string }) => {
      // An empty model_name means the global settings; the core reads it so.
      const settings =
        Object.keys(r.settings).length > 0
          ? service.updateTraceSettings(parseTraceSettingsUpdate(fromTraceSettingsWire(r.settings)), r.model_name)
          : service.traceSettings(r.model_name);
      return { settings: Object.fromEntries(Object.entries(traceSettingsToWire(settings)).map(([k, v]) => [k, { value: [v].flat() }])) };
    }),
    LogSettings: rpc('LogSettings', (r: { settings: Record<string, LogSettingValueWire> }) => ({
      settings: toLogSettingsWire(
        Object.keys(r.settings).length > 0 ? service.updateLogSettings(fromLogSettingsWire(r.settings)) : service.logSettings(),
      ),
    })),
  };
}

/**
 * ModelInfer, the hot path: the message's bytes decoded by hand (infer-message.ts), the metadata it
 * needs read from the headers, the reply written by hand into one framed Buffer and sent with its
 * status in one go (the request span's traceparent, when traced, as initial metadata).
 */
function modelInfer(service: InferenceService, logger: Logger): UnaryMethod {
  const answer = async (call: ServerCall, message: Buffer) => {
    try {
      // A call its client cancels (or whose deadline passes) cancels its request: a queued request leaves its queue.
      const response = await runInferMessage(service, message, undefined, callContextOf(call, call.signal));
      call.sendUnary(frameInferResponse(response), response.traceparent === undefined ? undefined : { traceparent: response.traceparent });
    } catch (error) {
      failCall(call, 'ModelInfer', logger, error);
    }
  };
  return {
    streaming: false,
    handle(call, message) {
      void answer(call, message);
    },
  };
}

/** Triton's unload_dependents: a bool_param, false when absent (grpc_server.cc refuses another type the same way). */
function unloadDependentsOf(parameters: Record<string, ModelRepositoryParameterWire>): boolean {
  const p = parameters['unload_dependents'];
  if (p === undefined) return false;
  if (p.parameter_choice !== 'bool_param')
    throw Errors.invalidArg("invalid value type for 'unload_dependents' parameter, expected bool_param.");
  return p.bool_param ?? false;
}

/** ModelRepositoryParameter oneofs as load parameters; the core decides what each may be. */
function loadParametersOf(wire: Record<string, ModelRepositoryParameterWire>): LoadParameters {
  const parameters: Record<string, LoadParameter> = {};
  for (const [name, p] of Object.entries(wire)) {
    switch (p.parameter_choice) {
      case 'bool_param':
        parameters[name] = { type: 'BOOL', value: p.bool_param ?? false };
        break;
      case 'int64_param':
        parameters[name] = { type: 'INT', value: Number(p.int64_param ?? 0) };
        break;
      case 'string_param':
        parameters[name] = { type: 'STRING', value: p.string_param ?? '' };
        break;
      case 'bytes_param': {
        const bytes = p.bytes_param ?? new Uint8Array(0);
        parameters[name] = { type: 'BYTES', byteLength: bytes.byteLength, bytes: () => bytes };
        break;
      }
      default:
        throw Errors.invalidArg(`load parameter '${name}' has no value`);
    }
  }
  return parameters;
}

/** SettingValue lists -> update values: an empty list clears, trace_level stays a list, others take their one value. */
function fromTraceSettingsWire(settings: Record<string, { value: string[] }>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(settings).map(([key, { value }]) => [
      key,
      value.length === 0 ? null : key === 'trace_level' || value.length > 1 ? value : value[0],
    ]),
  );
}

function fromLogSettingsWire(settings: Record<string, LogSettingValueWire>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(settings).map(([key, value]) => [key, value.parameter_choice ? value[value.parameter_choice] : undefined]),
  );
}

function toLogSettingsWire(settings: LogSettings): Record<string, LogSettingValueWire> {
  const out: Record<string, LogSettingValueWire> = {};
  for (const [key, value] of Object.entries(settings)) {
    out[key] =
      typeof value === 'boolean' ? { bool_param: value } : typeof value === 'number' ? { uint32_param: value } : { string_param: value };
  }
  return out;
}
