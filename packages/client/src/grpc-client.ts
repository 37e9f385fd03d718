import {
  Metadata,
  status,
  credentials as grpcCredentials,
  type ChannelCredentials,
  type ChannelOptions,
  type Client,
  type ClientDuplexStream,
  type ServiceError,
} from '@grpc/grpc-js';
import { BatchwiseClientError } from './errors.ts';
import { loadClientConstructors } from './grpc-protos.ts';
import { sharedMemoryParameters } from './shared-memory.ts';
import { fromRawBytes, toRawBytes } from './tensor-data.ts';
import type {
  DataType,
  InferenceClient,
  InferRequest,
  InferResult,
  InferStream,
  LoadModelOptions,
  ModelMetadata,
  ModelStatistics,
  Parameters,
  RepositoryIndexEntry,
  ServerMetadata,
  SharedMemoryRegionStatus,
  StreamOptions,
  StreamResponse,
} from './types.ts';

export interface GrpcClientOptions {
  /** `host:port`, e.g. `localhost:8001`. */
  readonly url: string;
  /** @default insecure (plain HTTP/2) */
  readonly credentials?: ChannelCredentials;
  /** Deadline of each unary call. @default 60_000 */
  readonly timeoutMs?: number;
  /** Largest message sent or received; the server's default limit. @default 256 MiB */
  readonly maxMessageBytes?: number;
  /**
   * Interval of client keepalive pings, also on idle connections. Off by default: Triton
   * (grpc C++) answers unexpected pings with GOAWAY unless started with its keepalive
   * flags; Batchwise accepts them. 30_000 keeps connections open through an ALB (60 s).
   */
  readonly keepaliveTimeMs?: number;
  /** Metadata sent with every call, e.g. the key of a Triton `--grpc-restricted-protocol`. */
  readonly metadata?: Readonly<Record<string, string>>;
  /**
   * HTTP/2 connections to open; unary inference calls take them in turn, every other call
   * uses the first. One connection carries many concurrent calls, but grpc-js handles each
   * connection's frames one after another: with many concurrent calls from one process,
   * 2-4 connections give 1.3-1.5x the calls per second (see bench/README.md). @default 1
   */
  readonly channels?: number;
  /** Extra channel options, applied last. */
  readonly channelOptions?: ChannelOptions;
  /** Folder of grpc_service.proto, health.proto and model_config.proto. */
  readonly protoDir?: string;
}

interface InferParameterWire {
  parameter_choice?: string;
  bool_param?: boolean;
  int64_param?: number;
  string_param?: string;
  double_param?: number;
  uint64_param?: number;
}

interface ModelInferResponseWire {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, InferParameterWire>;
  outputs: { name: string; datatype: string; shape: number[] }[];
  raw_output_contents: Buffer[];
}

type Unary = (
  request: unknown,
  metadata: Metadata,
  options: { deadline: Date },
  callback: (error: ServiceError | null, response: unknown) => void,
) => void;

/** Client of Batchwise's (and Triton's) inference.GRPCInferenceService. */
export class GrpcClient implements InferenceClient {
  private readonly client: Client & Record<string, unknown>;
  /** `client` first; unary inference calls rotate over all of them. */
  private readonly inferClients: (Client & Record<string, unknown>)[];
  private nextInferClient = 0;
  private readonly health: Client & Record<string, unknown>;
  private readonly timeoutMs: number;
  private readonly metadata: Metadata;

  constructor(options: GrpcClientOptions) {
    const constructors = loadClientConstructors(options.protoDir);
    const maxMessageBytes = options.maxMessageBytes ?? 256 * 1024 * 1024;
    const channelOptions: ChannelOptions = {
      'grpc.max_receive_message_length': maxMessageBytes,
      'grpc.max_send_message_length': maxMessageBytes,
      ...(options.keepaliveTimeMs !== undefined && {
        'grpc.keepalive_time_ms': options.keepaliveTimeMs,
        'grpc.keepalive_permit_without_calls': 1,
      }),
      ...options.channelOptions,
    };
    const creds = options.credentials ?? grpcCredentials.createInsecure();
    const channels = options.channels ?? 1;
    if (!Number.isInteger(channels) || channels < 1) throw new BatchwiseClientError(`channels must be a positive integer, got ${channels}`);
    // A local subchannel pool per channel: otherwise grpc-js shares one connection between
    // channels to the same target with the same options.
    const perChannel = channels > 1 ? { ...channelOptions, 'grpc.use_local_subchannel_pool': 1 } : channelOptions;
    this.inferClients = Array.from(
      { length: channels },
      () => new constructors.inference(options.url, creds, perChannel) as Client & Record<string, unknown>,
    );
    this.client = this.inferClients[0]!;
    // Health checks ride on the inference client's channel: one connection.
    this.health = new constructors.health(options.url, creds, { ...channelOptions, channelOverride: this.client.getChannel() }) as Client &
      Record<string, unknown>;
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.metadata = new Metadata();
    for (const [key, value] of Object.entries(options.metadata ?? {})) this.metadata.set(key, value);
  }

  async isServerLive(): Promise<boolean> {
    return (await this.call<{ live: boolean }>('ServerLive', {})).live;
  }

  async isServerReady(): Promise<boolean> {
    return (await this.call<{ ready: boolean }>('ServerReady', {})).ready;
  }

  async isModelReady(model: string, version?: string): Promise<boolean> {
    return (await this.call<{ ready: boolean }>('ModelReady', { name: model, version: version ?? '' })).ready;
  }

  serverMetadata(): Promise<ServerMetadata> {
    return this.call<ServerMetadata>('ServerMetadata', {});
  }

  modelMetadata(model: string, version?: string): Promise<ModelMetadata> {
    return this.call<ModelMetadata>('ModelMetadata', { name: model, version: version ?? '' });
  }

  async modelConfig(model: string, version?: string): Promise<Record<string, unknown>> {
    return (await this.call<{ config: Record<string, unknown> }>('ModelConfig', { name: model, version: version ?? '' })).config;
  }

  async infer(request: InferRequest): Promise<InferResult> {
    const client = this.inferClients[this.nextInferClient++ % this.inferClients.length]!;
    return decodeResponse(await this.call<ModelInferResponseWire>('ModelInfer', encodeRequest(request), client));
  }

  streamInfer(): InferStream {
    const open = this.client['ModelStreamInfer'] as (metadata: Metadata) => ClientDuplexStream<unknown, unknown>;
    const call = open.call(this.client, this.metadata.clone());
    const responses = async function* (): AsyncGenerator<StreamResponse> {
      try {
        for await (const message of call as AsyncIterable<{ error_message: string; infer_response: ModelInferResponseWire | null }>) {
          const final = message.infer_response?.parameters[FINAL_RESPONSE]?.bool_param ?? true;
          if (message.error_message !== '') {
            const id = message.infer_response?.id;
            yield { ok: false, error: new BatchwiseClientError(message.error_message), ...(id ? { id } : {}), final };
          } else {
            const { [FINAL_RESPONSE]: _, ...parameters } = message.infer_response!.parameters;
            yield { ok: true, result: decodeResponse({ ...message.infer_response!, parameters }), final };
          }
        }
      } catch (error) {
        throw toClientError(error);
      }
    };
    return {
      write: (request) => void call.write(encodeRequest(request)),
      end: () => void call.end(),
      cancel: () => call.cancel(),
      [Symbol.asyncIterator]: responses,
    };
  }

  /**
   * The responses of one request, as its model sends them (a decoupled model's zero, one or many;
   * any other model's one), over a ModelStreamInfer call of its own that ends with the request's final
   * response. An error response throws. Leaving the loop early, or aborting `signal`, cancels the call
   * and with it the request.
   */
  async *streamResponses(request: InferRequest, options: StreamOptions = {}): AsyncGenerator<InferResult> {
    const stream = this.streamInfer();
    const { signal } = options;
    const cancel = () => stream.cancel();
    if (signal?.aborted) throw new BatchwiseClientError('the request was cancelled before it was sent');
    signal?.addEventListener('abort', cancel, { once: true });
    let ended = false;
    try {
      stream.write({ ...request, parameters: { ...request.parameters, [EMPTY_FINAL_RESPONSE]: true } });
      for await (const answer of stream) {
        if (!answer.ok) throw answer.error;
        if (answer.result.outputs.length > 0 || !answer.final) yield answer.result;
        if (answer.final) {
          ended = true;
          stream.end();
          return;
        }
      }
    } finally {
      signal?.removeEventListener('abort', cancel);
      if (!ended) stream.cancel();
    }
  }

  async modelStatistics(model?: string, version?: string): Promise<ModelStatistics[]> {
    return (await this.call<{ model_stats: ModelStatistics[] }>('ModelStatistics', { name: model ?? '', version: version ?? '' }))
      .model_stats;
  }

  async repositoryIndex(options: { ready?: boolean } = {}): Promise<RepositoryIndexEntry[]> {
    const r = await this.call<{ models: RepositoryIndexEntry[] }>('RepositoryIndex', {
      repository_name: '',
      ready: options.ready ?? false,
    });
    return r.models;
  }

  async loadModel(model: string, options: LoadModelOptions = {}): Promise<void> {
    const parameters: Record<string, { string_param: string } | { bytes_param: Uint8Array }> =
      options.config === undefined ? {} : { config: { string_param: options.config } };
    for (const [path, bytes] of Object.entries(options.files ?? {})) parameters[`file:${path}`] = { bytes_param: bytes };
    await this.call('RepositoryModelLoad', { repository_name: '', model_name: model, parameters });
  }

  async unloadModel(model: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    const parameters = { unload_dependents: { bool_param: options.unloadDependents ?? false } };
    await this.call('RepositoryModelUnload', { repository_name: '', model_name: model, parameters });
  }

  async registerSystemSharedMemory(name: string, key: string, byteSize: number, offset = 0): Promise<void> {
    await this.call('SystemSharedMemoryRegister', { name, key, offset, byte_size: byteSize });
  }

  async unregisterSystemSharedMemory(name = ''): Promise<void> {
    await this.call('SystemSharedMemoryUnregister', { name });
  }

  async systemSharedMemoryStatus(name = ''): Promise<SharedMemoryRegionStatus[]> {
    const r = await this.call<{ regions: Record<string, { name: string; key: string; offset: string; byte_size: string }> }>(
      'SystemSharedMemoryStatus',
      { name },
    );
    return Object.values(r.regions).map((region) => ({
      name: region.name,
      key: region.key,
      offset: Number(region.offset),
      byteSize: Number(region.byte_size),
    }));
  }

  /**
   * grpc.health.v1 Check: '' is the server, any other name a model. Batchwise says
   * NOT_SERVING as status UNAVAILABLE (so that load balancers see it); Triton as OK with a
   * NOT_SERVING body. Both come back as 'NOT_SERVING'.
   */
  async healthCheck(service = ''): Promise<'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN'> {
    try {
      return (await this.call<{ status: 'SERVING' }>('Check', { service }, this.health)).status;
    } catch (error) {
      if (error instanceof BatchwiseClientError && error.grpcCode === status.UNAVAILABLE && error.message.startsWith('NOT_SERVING'))
        return 'NOT_SERVING';
      throw error;
    }
  }

  async close(): Promise<void> {
    this.health.close();
    for (const client of this.inferClients) client.close();
  }

  private call<T>(method: string, request: unknown, client = this.client): Promise<T> {
    const fn = client[method] as Unary;
    return new Promise((resolve, reject) => {
      fn.call(client, request, this.metadata.clone(), { deadline: new Date(Date.now() + this.timeoutMs) }, (error, response) => {
        if (error) reject(toClientError(error));
        else resolve(response as T);
      });
    });
  }
}

/** Triton's stream response parameter: the request's last response. */
const FINAL_RESPONSE = 'triton_final_response';
/** Triton's request parameter: send a decoupled model's flag-only final response too. */
const EMPTY_FINAL_RESPONSE = 'triton_enable_empty_final_response';

function toClientError(error: unknown): BatchwiseClientError {
  if (error instanceof BatchwiseClientError) return error;
  const e = error as Partial<ServiceError>;
  return new BatchwiseClientError(e.details || e.message || String(error), typeof e.code === 'number' ? { grpcCode: e.code } : {});
}

/** Inputs go as raw_input_contents: one exact little-endian buffer per input not in shared memory. */
function encodeRequest(request: InferRequest): unknown {
  return {
    model_name: request.model,
    model_version: request.version ?? '',
    id: request.id ?? '',
    parameters: toWireParameters(request.parameters),
    inputs: request.inputs.map((i) => ({
      name: i.name,
      datatype: i.datatype,
      shape: [...i.shape],
      parameters: toWireParameters({ ...i.parameters, ...(i.sharedMemory && sharedMemoryParameters(i.sharedMemory)) }),
    })),
    outputs: (request.outputs ?? []).map((o) =>
      typeof o === 'string'
        ? { name: o }
        : {
            name: o.name,
            parameters: toWireParameters({ ...o.parameters, ...(o.sharedMemory && sharedMemoryParameters(o.sharedMemory)) }),
          },
    ),
    // Inputs in shared memory take no entry.
    raw_input_contents: request.inputs.flatMap((i) => (i.sharedMemory ? [] : [toRawBytes(i.name, i.datatype, i.data)])),
  };
}

function toWireParameters(parameters: Parameters | undefined): Record<string, InferParameterWire> {
  const out: Record<string, InferParameterWire> = {};
  for (const [key, value] of Object.entries(parameters ?? {})) {
    if (typeof value === 'boolean') out[key] = { bool_param: value };
    else if (typeof value === 'string') out[key] = { string_param: value };
    else out[key] = Number.isSafeInteger(value) ? { int64_param: value } : { double_param: value };
  }
  return out;
}

function decodeResponse(r: ModelInferResponseWire): InferResult {
  if (r.raw_output_contents.length !== r.outputs.length) {
    throw new BatchwiseClientError(`response has ${r.outputs.length} outputs but ${r.raw_output_contents.length} raw_output_contents`);
  }
  const parameters: Parameters = {};
  for (const [key, p] of Object.entries(r.parameters)) {
    const value = p.parameter_choice ? p[p.parameter_choice as keyof InferParameterWire] : undefined;
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') parameters[key] = value;
  }
  return {
    modelName: r.model_name,
    modelVersion: r.model_version,
    ...(r.id !== '' && { id: r.id }),
    ...(Object.keys(parameters).length > 0 && { parameters }),
    outputs: r.outputs.map((o, n) => ({
      name: o.name,
      datatype: o.datatype as DataType,
      shape: o.shape,
      data: fromRawBytes(o.name, o.datatype as DataType, r.raw_output_contents[n]!),
    })),
  };
}
