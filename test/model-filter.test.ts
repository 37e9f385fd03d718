/**
 * --model-filter (issue 37) on real servers: a model of the repository outside the filter is never
 * loaded and answers exactly as a model the repository does not have, over HTTP and gRPC; the
 * repository index lists only the filter's models; with --load-on-demand a request never loads it,
 * and a load request or --load-model naming it is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, HttpClient } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { identityConfig, makeRepository } from './support/repository.ts';
import { postJson, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const MODELS = ['text-a', 'text-b', 'vision', 'visionary'].map((name) => ({
  name,
  model: identity('FP32', [4]),
  config: identityConfig(name),
}));
const body = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] };

/** What a call answers: its value, or its error's code and message with the model's name made generic. */
async function outcome(call: () => Promise<unknown>, name: string): Promise<unknown> {
  try {
    return { value: await call() };
  } catch (error) {
    if (!(error instanceof BatchwiseClientError)) throw error;
    return { grpcCode: error.grpcCode, message: error.message.replaceAll(name, '<model>') };
  }
}

/** Every HTTP answer about a model, with its name made generic. */
async function httpAnswers(url: string, name: string): Promise<unknown[]> {
  const generic = (text: string) => text.replaceAll(name, '<model>');
  const answers: unknown[] = [];
  for (const path of [`/v2/models/${name}`, `/v2/models/${name}/ready`, `/v2/models/${name}/config`, `/v2/models/${name}/stats`]) {
    const response = await fetch(`${url}${path}`);
    answers.push([path.replace(name, '<model>'), response.status, generic(await response.text())]);
  }
  const infer = await postJson(`${url}/v2/models/${name}/infer`, body);
  answers.push(['infer', infer.status, generic(JSON.stringify(infer.json))]);
  return answers;
}

async function grpcAnswers(grpc: GrpcClient, name: string): Promise<unknown[]> {
  return [
    await outcome(() => grpc.isModelReady(name), name),
    await outcome(() => grpc.modelMetadata(name), name),
    await outcome(() => grpc.modelConfig(name), name),
    await outcome(() => grpc.modelStatistics(name), name),
    await outcome(
      () => grpc.infer({ model: name, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] }),
      name,
    ),
  ];
}

describe('--model-filter on real servers', () => {
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: Server;
  let grpc: GrpcClient;
  let http: HttpClient;

  beforeAll(async () => {
    repo = await makeRepository(MODELS);
    server = await startTestServer([repo.dir], { modelFilter: ['text-*,vision'] });
    grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    http = new HttpClient({ url: server.url });
  });
  afterAll(async () => {
    await grpc?.close();
    await http?.close();
    await server?.close();
    await repo?.remove();
  });

  it("serves the filter's models, by prefix and by exact name", async () => {
    for (const name of ['text-a', 'text-b', 'vision']) {
      const result = await http.infer({ model: name, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
      expect(Array.from(result.outputs[0]!.data as Float32Array), name).toEqual([1, 2, 3, 4]);
    }
  });

  it('answers a model outside it exactly as one the repository does not have, over HTTP and gRPC', async () => {
    const unknown = await httpAnswers(server.url, 'nope');
    expect(await httpAnswers(server.url, 'visionary')).toEqual(unknown);
    expect(unknown[unknown.length - 1]).toEqual([
      'infer',
      400,
      JSON.stringify({ error: "Request for unknown model: '<model>' is not found" }),
    ]);
    expect(await grpcAnswers(grpc, 'visionary')).toEqual(await grpcAnswers(grpc, 'nope'));
  });

  it('lists only its models in the repository index, on both protocols', async () => {
    const names = (await http.repositoryIndex()).map((row) => row.name);
    expect(names).toEqual(['text-a', 'text-b', 'vision']);
    expect((await grpc.repositoryIndex()).map((row) => row.name)).toEqual(names);
    expect((await http.modelStatistics()).map((s) => s.name).sort()).toEqual(names);
  });
});

describe('--model-filter with --load-on-demand in explicit mode', () => {
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: Server;
  let http: HttpClient;

  beforeAll(async () => {
    repo = await makeRepository(MODELS);
    server = await startTestServer([repo.dir], { modelFilter: ['text-*'], modelControlMode: 'explicit', loadOnDemand: true });
    http = new HttpClient({ url: server.url });
  });
  afterAll(async () => {
    await http?.close();
    await server?.close();
    await repo?.remove();
  });

  it('loads its models on their first request, and never one outside it', async () => {
    expect((await postJson(`${server.url}/v2/models/text-b/infer`, body)).status).toBe(200);
    expect(await postJson(`${server.url}/v2/models/vision/infer`, body)).toEqual({
      status: 400,
      json: { error: "Request for unknown model: 'vision' is not found" },
    });
    const rows = await http.repositoryIndex();
    expect(rows.map((row) => [row.name, row.state])).toEqual([
      ['text-a', 'UNAVAILABLE'],
      ['text-b', 'READY'],
    ]);
  });

  it('refuses a load request for a model outside it, naming the filter', async () => {
    const { status, json } = await postJson(`${server.url}/v2/repository/models/vision/load`, {});
    expect(status).toBe(400);
    expect(json.error).toBe("failed to load 'vision': this server serves only the models of --model-filter (text-*)");
    expect((await http.repositoryIndex()).map((row) => row.name)).toEqual(['text-a', 'text-b']);
  });

  it('refuses to start with a --load-model outside it, or with an entry that is neither a name nor a prefix', async () => {
    await expect(
      startTestServer([repo.dir], { modelFilter: ['text-*'], loadModels: ['vision'], modelControlMode: 'explicit' }),
    ).rejects.toThrow("--load-model 'vision' is outside --model-filter (text-*): it would never load");
    await expect(startTestServer([repo.dir], { modelFilter: ['te*xt'] })).rejects.toThrow(
      "--model-filter 'te*xt': 'te*xt' is neither a model name nor a prefix followed by *",
    );
  });
});
