/**
 * The text_generation example on a real server, differentially: an ensemble (text_tokenizer, the
 * decoupled token_generator calling next_token, text_detokenizer; examples/model_repository) whose
 * tokens equal those of the same greedy loop run in-process by ONNX Runtime on the committed
 * next_token model, for one stream and for 16 at once (over HTTP generate_stream and gRPC
 * ModelStreamInfer); the 16 streams' next-token calls batch together, and so do their tokens in the
 * detokenizer. text_generation_single, the same in one decoupled model, streams the same tokens.
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

const MODELS = ['next_token', 'text_tokenizer', 'token_generator', 'text_detokenizer', 'text_generation', 'text_generation_single'];
const PROMPTS = ['the ', 'When a client', 'batch', 'a stream is', 'xyz', 'q', '', 'the model runs'].flatMap((p) => [p, `${p}.`]);
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

async function overHttp(prompt: string, model = 'text_generation'): Promise<string[]> {
  const tokens: string[] = [];
  for await (const r of http.generateStream(model, { text_input: prompt, max_tokens: TOKENS })) tokens.push(r['text_output'] as string);
  return tokens;
}

async function overGrpc(prompt: string, model = 'text_generation'): Promise<string[]> {
  const tokens: string[] = [];
  const request = {
    model,
    inputs: [
      { name: 'text_input', datatype: 'BYTES' as const, shape: [1, 1], data: [prompt] },
      { name: 'max_tokens', datatype: 'INT32' as const, shape: [1, 1], data: [TOKENS] },
    ],
  };
  for await (const result of grpc.streamResponses(request))
    tokens.push(Buffer.from((result.outputs[0]!.data as Uint8Array[])[0]!).toString());
  return tokens;
}

const statsOf = async (model: string) => (await http.modelStatistics(model))[0]!;

describe('text_generation against the same greedy loop in ONNX Runtime', () => {
  it('one stream', async () => {
    const expected = await inProcess(PROMPTS[0]!);
    expect(expected.join('')).toMatch(/^\S/);
    expect(await overHttp(PROMPTS[0]!)).toEqual(expected);
  });

  it('16 streams at once, whose next-token calls and tokens batch together', async () => {
    expect(PROMPTS).toHaveLength(16);
    const expected = await Promise.all(PROMPTS.map(inProcess));
    const before = { nextToken: await statsOf('next_token'), detokenizer: await statsOf('text_detokenizer') };
    const got = await Promise.all(PROMPTS.map((p, i) => (i % 2 === 0 ? overHttp(p) : overGrpc(p))));
    expect(got).toEqual(expected);
    for (const [model, stats] of Object.entries(before)) {
      const after = await statsOf(model === 'nextToken' ? 'next_token' : 'text_detokenizer');
      const inferences = after.inference_count - stats.inference_count;
      const executions = after.execution_count - stats.execution_count;
      expect(inferences).toBe(PROMPTS.length * TOKENS);
      expect(executions).toBeLessThan(inferences);
    }
  });

  it('text_generation_single, the same in one decoupled model, streams the same tokens', async () => {
    const expected = await Promise.all(PROMPTS.slice(0, 4).map(inProcess));
    const got = await Promise.all(
      PROMPTS.slice(0, 4).map((p, i) => (i % 2 === 0 ? overHttp(p, 'text_generation_single') : overGrpc(p, 'text_generation_single'))),
    );
    expect(got).toEqual(expected);
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

  it('a bad max_tokens is the generator step’s error, named by the ensemble', async () => {
    const events: unknown[] = [];
    const response = await fetch(`${server.url}/v2/models/text_generation/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ text_input: 'the ', max_tokens: -1 }),
    });
    for (const event of (await response.text()).split('\n\n').filter(Boolean)) events.push(JSON.parse(event.slice('data: '.length)));
    expect(events).toEqual([
      {
        error: "in ensemble 'text_generation', model 'token_generator': max_tokens must be 0 or more, got -1",
      },
    ]);
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
