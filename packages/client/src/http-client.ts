import { Pool } from 'undici';
import { BatchwiseClientError } from './errors.ts';
import { decodeHttpInferResponse, encodeHttpInferRequest, encodeRawHttpInferRequest, HEADER_LENGTH } from './http-infer-codec.ts';
import { sseData } from './sse.ts';
import type {
  GenerateRequest,
  GenerateResponse,
  HttpInferOptions,
  InferenceClient,
  InferRequest,
  InferResult,
  InferStream,
  LoadModelOptions,
  ModelMetadata,
  ModelStatistics,
  RepositoryIndexEntry,
  ServerMetadata,
  SharedMemoryRegionStatus,
  StreamOptions,
} from './types.ts';

/** How `generate` and `generateStream` send a request. */
export interface GenerateOptions extends StreamOptions {
  /** Absent: the version the model's version policy picks. */
  readonly version?: string;
}

export interface HttpClientOptions {
  /** e.g. `http://localhost:8000`. */
  readonly url: string;
  /** Keep-alive connections kept to the server. @default 16 */
  readonly connections?: number;
  /** Time allowed for each response (headers and body). @default 60_000 */
  readonly timeoutMs?: number;
  /** Headers sent with every request, e.g. the key of a Triton `--http-restricted-api`. */
  readonly headers?: Readonly<Record<string, string>>;
}

type Method = 'GET' | 'POST';

/** KServe v2 HTTP/REST client, JSON and binary tensor extension, over an undici Pool. */
export class HttpClient implements InferenceClient {
  private readonly pool: Pool;
  private readonly timeoutMs: number;
  private readonly headers: Readonly<Record<string, string>>;

  constructor(options: HttpClientOptions) {
    this.headers = options.headers ?? {};
    this.pool = new Pool(options.url, { connections: options.connections ?? 16 });
    this.timeoutMs = options.timeoutMs ?? 60_000;
  }

  isServerLive(): Promise<boolean> {
    return this.probe('/v2/health/live');
  }

  isServerReady(): Promise<boolean> {
    return this.probe('/v2/health/ready');
  }

  isModelReady(model: string, version?: string): Promise<boolean> {
    return this.probe(`${modelPath(model, version)}/ready`);
  }

  async serverMetadata(): Promise<ServerMetadata> {
    return (await this.json('GET', '/v2')) as ServerMetadata;
  }

  async modelMetadata(model: string, version?: string): Promise<ModelMetadata> {
    return (await this.json('GET', modelPath(model, version))) as ModelMetadata;
  }

  async modelConfig(model: string, version?: string): Promise<Record<string, unknown>> {
    return (await this.json('GET', `${modelPath(model, version)}/config`)) as Record<string, unknown>;
  }

  /** `raw`: send the one input as a raw binary request (HttpInferOptions). */
  async infer(request: InferRequest, options: HttpInferOptions = {}): Promise<InferResult> {
    const { headers, body } = options.raw ? encodeRawHttpInferRequest(request) : encodeHttpInferRequest(request);
    const response = await this.send('POST', `${modelPath(request.model, request.version)}/infer`, body, headers);
    const header = response.headers[HEADER_LENGTH];
    return decodeHttpInferResponse(response.body, Array.isArray(header) ? header[0] : header);
  }

  streamInfer(): InferStream {
    throw new BatchwiseClientError('streaming inference needs the gRPC client: KServe v2 HTTP has no stream (see generateStream)');
  }

  /**
   * Triton's generate extension (`POST .../generate`): keys of `request` that name model inputs are
   * tensors, `id` its id, the others parameters. The one response; a model that answers with other
   * than one (a decoupled model's zero or many) is an error: use generateStream.
   */
  async generate(model: string, request: GenerateRequest, options: GenerateOptions = {}): Promise<GenerateResponse> {
    const response = await this.send('POST', `${modelPath(model, options.version)}/generate`, JSON.stringify(request), {}, options.signal);
    return JSON.parse(response.body.toString('utf8')) as GenerateResponse;
  }

  /**
   * Triton's generate extension as Server-Sent Events (`POST .../generate_stream`): each response as
   * the model sends it. An error throws, whether refused before the first response (its status) or
   * sent as an event of the stream. Leaving the loop early, or aborting `signal`, closes the connection,
   * which cancels the request on the server.
   */
  async *generateStream(model: string, request: GenerateRequest, options: GenerateOptions = {}): AsyncGenerator<GenerateResponse> {
    const abort = new AbortController();
    const { signal } = options;
    const cancel = () => abort.abort();
    if (signal?.aborted) throw new BatchwiseClientError('the request was cancelled before it was sent');
    signal?.addEventListener('abort', cancel, { once: true });
    let complete = false;
    try {
      const path = `${modelPath(model, options.version)}/generate_stream`;
      const response = await this.request(
        'POST',
        path,
        JSON.stringify(request),
        { 'content-type': 'application/json', accept: 'text/event-stream' },
        abort.signal,
      );
      const status = response.statusCode;
      const type = response.headers['content-type'];
      if (!String(type).startsWith('text/event-stream')) {
        const bytes = Buffer.from(await response.body.arrayBuffer());
        throw new BatchwiseClientError(errorMessage(bytes, status), { httpStatus: status });
      }
      for await (const data of sseData(response.body)) {
        const event = JSON.parse(data) as GenerateResponse | { error: string };
        if ('error' in event && typeof event.error === 'string' && !('model_name' in event)) {
          throw new BatchwiseClientError(event.error, { httpStatus: status >= 400 ? status : 200 });
        }
        yield event as GenerateResponse;
      }
      complete = true;
    } finally {
      signal?.removeEventListener('abort', cancel);
      if (!complete) abort.abort();
    }
  }

  async modelStatistics(model?: string, version?: string): Promise<ModelStatistics[]> {
    const path = model === undefined ? '/v2/models/stats' : `${modelPath(model, version)}/stats`;
    return ((await this.json('GET', path)) as { model_stats: ModelStatistics[] }).model_stats;
  }

  async repositoryIndex(options: { ready?: boolean } = {}): Promise<RepositoryIndexEntry[]> {
    return (await this.json('POST', '/v2/repository/index', { ready: options.ready ?? false })) as RepositoryIndexEntry[];
  }

  async loadModel(model: string, options: LoadModelOptions = {}): Promise<void> {
    const parameters: Record<string, string> = options.config === undefined ? {} : { config: options.config };
    for (const [path, bytes] of Object.entries(options.files ?? {})) {
      parameters[`file:${path}`] = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
    }
    await this.send('POST', `/v2/repository/models/${encodeURIComponent(model)}/load`, JSON.stringify({ parameters }));
  }

  async unloadModel(model: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    const parameters = { unload_dependents: options.unloadDependents ?? false };
    await this.send('POST', `/v2/repository/models/${encodeURIComponent(model)}/unload`, JSON.stringify({ parameters }));
  }

  async registerSystemSharedMemory(name: string, key: string, byteSize: number, offset = 0): Promise<void> {
    await this.send(
      'POST',
      `/v2/systemsharedmemory/region/${encodeURIComponent(name)}/register`,
      JSON.stringify({ key, offset, byte_size: byteSize }),
    );
  }

  async unregisterSystemSharedMemory(name?: string): Promise<void> {
    const path =
      name === undefined || name === ''
        ? '/v2/systemsharedmemory/unregister'
        : `/v2/systemsharedmemory/region/${encodeURIComponent(name)}/unregister`;
    await this.send('POST', path, '');
  }

  async systemSharedMemoryStatus(name?: string): Promise<SharedMemoryRegionStatus[]> {
    const path =
      name === undefined || name === ''
        ? '/v2/systemsharedmemory/status'
        : `/v2/systemsharedmemory/region/${encodeURIComponent(name)}/status`;
    const regions = (await this.json('GET', path)) as { name: string; key: string; offset: number; byte_size: number }[];
    return regions.map((r) => ({ name: r.name, key: r.key, offset: r.offset, byteSize: r.byte_size }));
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async probe(path: string): Promise<boolean> {
    const response = await this.request('GET', path);
    await response.body.dump();
    return response.statusCode === 200;
  }

  private async json(method: Method, path: string, body?: unknown): Promise<unknown> {
    const response = await this.send(method, path, body === undefined ? undefined : JSON.stringify(body));
    return JSON.parse(response.body.toString('utf8'));
  }

  /** A request whose non-2xx answer becomes a BatchwiseClientError with the server's message. */
  private async send(method: Method, path: string, body?: string | Buffer, headers: Record<string, string> = {}, signal?: AbortSignal) {
    const response = await this.request(
      method,
      path,
      body,
      body !== undefined && !headers['content-type'] ? { ...headers, 'content-type': 'application/json' } : headers,
      signal,
    );
    const bytes = Buffer.from(await response.body.arrayBuffer());
    if (response.statusCode < 200 || response.statusCode >= 300) {
      throw new BatchwiseClientError(errorMessage(bytes, response.statusCode), { httpStatus: response.statusCode });
    }
    return { headers: response.headers, body: bytes };
  }

  private async request(method: Method, path: string, body?: string | Buffer, headers: Record<string, string> = {}, signal?: AbortSignal) {
    try {
      return await this.pool.request({
        method,
        path,
        body,
        headers: { ...this.headers, ...headers },
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        ...(signal && { signal }),
      });
    } catch (error) {
      throw new BatchwiseClientError(`${method} ${path} failed: ${(error as Error).message}`);
    }
  }
}

function modelPath(model: string, version?: string): string {
  const base = `/v2/models/${encodeURIComponent(model)}`;
  return version === undefined || version === '' ? base : `${base}/versions/${encodeURIComponent(version)}`;
}

function errorMessage(body: Buffer, status: number): string {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { error?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
  } catch {
    // not JSON: fall through
  }
  return body.byteLength > 0 ? body.toString('utf8') : `HTTP ${status}`;
}
