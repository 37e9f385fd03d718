import { pino } from 'pino';
import { HttpClient } from '@batchwise/client';
import { startServer, type RunningServer, type ServerOptions } from '@batchwise/server';
import { makeRepository, type RepositoryModel } from './repository.ts';

/** A real server on loopback with ephemeral ports and quiet logs. */
export async function startTestServer(
  repositories: string[],
  options: Partial<ServerOptions> = {},
): Promise<RunningServer & { url: string }> {
  const server = await startServer({
    modelRepositories: repositories,
    host: '127.0.0.1',
    httpPort: 0,
    grpcPort: 0,
    metricsPort: 0,
    logger: pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' }),
    ...options,
  });
  return Object.assign(server, { url: `http://127.0.0.1:${server.httpPort}` });
}

export interface ServedModels {
  readonly server: RunningServer & { url: string };
  readonly client: HttpClient;
  /** Closes the client and the server and removes the repository. */
  close(): Promise<void>;
}

/** Generated models in a throw-away repository, served by a test server, with an HTTP client. */
export async function serveModels(models: readonly RepositoryModel[], options: Partial<ServerOptions> = {}): Promise<ServedModels> {
  const repo = await makeRepository(models);
  const server = await startTestServer([repo.dir], options);
  const client = new HttpClient({ url: server.url });
  return {
    server,
    client,
    close: async () => {
      await client.close();
      await server.close();
      await repo.remove();
    },
  };
}

export async function postJson(url: string, body: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text.length > 0 ? JSON.parse(text) : undefined };
}

/** Sends a request in the binary tensor extension: JSON header, then the tensors' bytes. */
export async function postBinary(
  url: string,
  header: unknown,
  tensors: readonly Uint8Array[],
  headerLengthOverride?: string,
): Promise<{ status: number; headers: Headers; body: Buffer }> {
  const json = Buffer.from(JSON.stringify(header));
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': headerLengthOverride ?? String(json.length),
    },
    body: Buffer.concat([json, ...tensors.map((t) => Buffer.from(t.buffer, t.byteOffset, t.byteLength))]),
  });
  return { status: response.status, headers: response.headers, body: Buffer.from(await response.arrayBuffer()) };
}

/** Splits a binary-extension response into its JSON header and the bytes after it. */
export function splitBinaryResponse(response: { headers: Headers; body: Buffer }): { json: any; binary: Buffer } {
  const length = Number(response.headers.get('inference-header-content-length') ?? response.body.length);
  return { json: JSON.parse(response.body.subarray(0, length).toString('utf8')), binary: response.body.subarray(length) };
}

export async function isReady(url: string): Promise<boolean> {
  return (await fetch(`${url}/v2/health/ready`)).status === 200;
}

/** GET a JSON document (typed loosely: tests assert on its shape). */
export async function getJson(url: string): Promise<any> {
  return (await fetch(url)).json();
}
