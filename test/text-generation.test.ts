/**
 * The text_generation example (examples/model_repository/text_generation and next_token) on a real
 * server, differentially: the tokens it streams equal those of the same greedy loop run in-process
 * by ONNX Runtime on the committed next_token model, for one stream and for 8 at once (over HTTP
 * generate_stream and gRPC ModelStreamInfer), and the 8 streams' next-token calls batch together.
 */
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient } from '@batchwise/client';
import { argmax, contextOf, VOCABULARY } from '@batchwise/modelgen';
import { loadOrt, type OrtSession } from '@batchwise/modelgen/test-support/ort.ts';
import { EXAMPLES } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

const MODELS = ['next_token', 'text_generation'];
const PROMPTS = ['the ', 'When a client', 'batch', 'a stream is', 'xyz', 'q', '', 'the model runs'];
const TOKENS = 24;

let dir: string;
let server: Awaited<ReturnType<typeof startTestServer>>;
let http: HttpClient;
let grpc: GrpcClient;
let session: OrtSession;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'batchwise-text-generation-'));
  for (const model of MODELS) await cp(join(EXAMPLES, model), join(dir, model), { recursive: true });
  server = await startTestServer([dir]);
  http = new HttpClient({ url: server.url });
  grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
  session = await loadOrt().InferenceSession.create(await readFile(join(EXAMPLES, 'next_token', '1', 'model.onnx')));
});
afterAll(async () => {
  await grpc?.close();
  await http?.close();
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The same greedy loop, in-process: the highest logit of the next character after the last two, TOKENS times. */
async function inProcess(prompt: string): Promise<string[]> {
  const ort = loadOrt();
  const tokens: string[] = [];
  let text = prompt;
  for (let i = 0; i < TOKENS; i++) {
    const context = BigInt64Array.from(contextOf(text).map(BigInt));
    const { logits } = await session.run({ context: new ort.Tensor('int64', context, [1, 2]) });
    const next = VOCABULARY[argmax(logits!.data as Float32Array)]!;
    tokens.push(next);
    text += next;
  }
  return tokens;
}

async function overHttp(prompt: string): Promise<string[]> {
  const tokens: string[] = [];
  for await (const r of http.generateStream('text_generation', { text_input: prompt, max_tokens: TOKENS }))
    tokens.push(r['text_output'] as string);
  return tokens;
}

async function overGrpc(prompt: string): Promise<string[]> {
  const tokens: string[] = [];
  const request = {
    model: 'text_generation',
    inputs: [
      { name: 'text_input', datatype: 'BYTES' as const, shape: [1, 1], data: [prompt] },
      { name: 'max_tokens', datatype: 'INT32' as const, shape: [1, 1], data: [TOKENS] },
    ],
  };
  for await (const result of grpc.streamResponses(request))
    tokens.push(Buffer.from((result.outputs[0]!.data as Uint8Array[])[0]!).toString());
  return tokens;
}

const nextTokenStats = async () => (await http.modelStatistics('next_token'))[0]!;

describe('text_generation against the same greedy loop in ONNX Runtime', () => {
  it('one stream', async () => {
    const expected = await inProcess(PROMPTS[0]!);
    expect(expected.join('')).toMatch(/^\S/);
    expect(await overHttp(PROMPTS[0]!)).toEqual(expected);
  });

  it('8 streams at once, whose next-token calls batch together', async () => {
    const expected = await Promise.all(PROMPTS.map(inProcess));
    const before = await nextTokenStats();
    const got = await Promise.all(PROMPTS.map((p, i) => (i % 2 === 0 ? overHttp(p) : overGrpc(p))));
    expect(got).toEqual(expected);
    const after = await nextTokenStats();
    const inferences = after.inference_count - before.inference_count;
    const executions = after.execution_count - before.execution_count;
    expect(inferences).toBe(PROMPTS.length * TOKENS);
    expect(executions).toBeLessThan(inferences);
  });

  it('docs/examples.md gives the shapes of its metadata, and a gRPC stream with the shape it gives one request works ([1] does not)', async () => {
    const docs = await readFile(new URL('../docs/examples.md', import.meta.url), 'utf8');
    const rows = [...docs.matchAll(/^\| (input|output) `(\w+)` \| (\w+) \| `(\[[^\]]*\])` \| `(\[[^\]]*\])`/gm)];
    const shown = rows.map(([, , name, datatype, metadata, one]) => ({ name, datatype, metadata, one }));
    const metadata = await http.modelMetadata('text_generation');
    const actual = [...metadata.inputs, ...metadata.outputs].map((t) => ({
      name: t.name,
      datatype: t.datatype,
      metadata: JSON.stringify(t.shape),
    }));
    expect(shown.map(({ name, datatype, metadata }) => ({ name, datatype, metadata: JSON.stringify(JSON.parse(metadata!)) }))).toEqual(
      actual,
    );

    const oneRequest = Object.fromEntries(shown.map((t) => [t.name, JSON.parse(t.one!) as number[]]));
    const request = (shape: (name: string) => number[]) => ({
      model: 'text_generation',
      inputs: [
        { name: 'text_input', datatype: 'BYTES' as const, shape: shape('text_input'), data: ['the '] },
        { name: 'max_tokens', datatype: 'INT32' as const, shape: shape('max_tokens'), data: [2] },
      ],
    });
    const tokens: string[] = [];
    for await (const result of grpc.streamResponses(request((name) => oneRequest[name]!))) {
      expect(result.outputs[0]!.shape).toEqual(oneRequest['text_output']);
      tokens.push(Buffer.from((result.outputs[0]!.data as Uint8Array[])[0]!).toString());
    }
    expect(tokens).toEqual((await inProcess('the ')).slice(0, 2));
    const refused = async () => {
      for await (const _ of grpc.streamResponses(request(() => [1]))) void _;
    };
    await expect(refused()).rejects.toThrow(/Expected \[-1,1\]/);
  });

  it('generate answers a one-token request; max_tokens 0 streams nothing', async () => {
    expect(await http.generate('text_generation', { text_input: 'the ', max_tokens: 1 })).toEqual({
      model_name: 'text_generation',
      model_version: '1',
      text_output: (await inProcess('the '))[0],
    });
    const none: unknown[] = [];
    for await (const r of http.generateStream('text_generation', { text_input: 'x', max_tokens: 0 })) none.push(r);
    expect(none).toEqual([]);
  });
});
