/**
 * The example repository (what `pnpm start` serves) on a real server: every model loads, and
 * both pipelines and the BLS router answer over HTTP JSON, HTTP binary, gRPC and
 * @batchwise/client as the in-process runs of the same models do, and so do Triton's simple_string and
 * simple_int8 (simple_identity returns its bytes); text_classification_py (its
 * tokenizer and postprocess in Triton's Python backend form) answers what text_classification does,
 * bit for bit.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient, type InferResult } from '@batchwise/client';
import { EXAMPLE_MODELS } from '@batchwise/modelgen';
import { loadOrt } from '@batchwise/modelgen/test-support/ort.ts';
import { preprocessImage } from '../examples/src/image-preprocess/preprocess.ts';
import { parseLabels, softmax, topK } from '../examples/src/postprocess/top-k.ts';
import { BLUE, RED, jpegFile, png } from '../examples/test-support/images.ts';
import { SENTENCES } from '../examples/test-support/sentences.ts';
import { EXAMPLES } from './support/repository.ts';
import { postBinary, postJson, splitBinaryResponse, startTestServer } from './support/server.ts';

const TEXTS = Object.keys(SENTENCES);
const EXPECTED_LABELS = Object.values(SENTENCES);

/** The KServe binary BYTES layout: each element as a 4-byte little-endian length, then its bytes. */
function bytesTensor(elements: readonly Buffer[]): Buffer {
  return Buffer.concat(elements.flatMap((e) => [Buffer.from(new Uint32Array([e.length]).buffer), e]));
}

/** The first label of each row of a [rows, k] labels output. */
function firstLabels(result: InferResult): string[] {
  const labels = result.outputs.find((o) => o.name === 'labels')!;
  const k = labels.shape[1];
  return (labels.data as Uint8Array[]).filter((_, i) => i % k === 0).map((b) => Buffer.from(b).toString());
}

/** What color_net and image_postprocess give in-process (ONNX Runtime, the same top-k code) for one image file. */
async function inProcessImageLabels(file: Buffer): Promise<{ labels: string[]; scores: number[] }> {
  const ort = loadOrt();
  const net = await ort.InferenceSession.create(await readFile(join(EXAMPLES, 'color_net', '1', 'model.onnx')));
  const names = parseLabels(await readFile(join(EXAMPLES, 'image_postprocess', 'labels.txt'), 'utf8'));
  const { logits } = await net.run({ pixels: new ort.Tensor('float32', preprocessImage(file, 32, 32), [1, 3, 32, 32]) });
  await net.release();
  const ranked = topK(softmax(logits.data as Float32Array), 3);
  return { labels: ranked.map((r) => names[r.index]), scores: ranked.map((r) => r.score) };
}

describe('example pipelines on a server serving examples/model_repository', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let http: HttpClient;
  let grpc: GrpcClient;
  beforeAll(async () => {
    server = await startTestServer([EXAMPLES]);
    http = new HttpClient({ url: server.url });
    grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
  });
  afterAll(async () => {
    await http?.close();
    grpc?.close();
    await server?.close();
  });

  it('loads every example model, and the server is ready', async () => {
    const index = await postJson(`${server.url}/v2/repository/index`, {});
    const failed = index.json.filter((m: { state: string }) => m.state !== 'READY');
    expect(failed).toEqual([]);
    const names = new Set(index.json.map((m: { name: string }) => m.name));
    for (const ex of EXAMPLE_MODELS) expect(names.has(ex.name), ex.name).toBe(true);
    expect((await fetch(`${server.url}/v2/health/ready`)).status).toBe(200);
  });

  describe('text_classification', () => {
    it('HTTP JSON: one request with a string returns its labels, most likely first', async () => {
      const response = await postJson(`${server.url}/v2/models/text_classification/infer`, {
        inputs: [{ name: 'text', datatype: 'BYTES', shape: [1, 1], data: ['I love this wonderful movie'] }],
      });
      expect(response.status).toBe(200);
      const labels = response.json.outputs.find((o: { name: string }) => o.name === 'labels');
      expect(labels).toMatchObject({ datatype: 'BYTES', shape: [1, 3] });
      expect(labels.data[0]).toBe('positive');
      expect(new Set(labels.data)).toEqual(new Set(['negative', 'neutral', 'positive']));
      const scores = response.json.outputs.find((o: { name: string }) => o.name === 'scores');
      expect(scores.data[0]).toBeGreaterThan(0.5);
    });

    it('HTTP JSON: a batch of sentences, each its own label', async () => {
      const response = await postJson(`${server.url}/v2/models/text_classification/infer`, {
        inputs: [{ name: 'text', datatype: 'BYTES', shape: [TEXTS.length, 1], data: TEXTS }],
        outputs: [{ name: 'labels' }],
      });
      expect(response.status).toBe(200);
      expect(response.json.outputs[0].data.filter((_: string, i: number) => i % 3 === 0)).toEqual(EXPECTED_LABELS);
    });

    it('gRPC (@batchwise/client): the same labels', async () => {
      const result = await grpc.infer({
        model: 'text_classification',
        inputs: [{ name: 'text', datatype: 'BYTES', shape: [TEXTS.length, 1], data: TEXTS }],
      });
      expect(firstLabels(result)).toEqual(EXPECTED_LABELS);
    });

    it('HTTP binary (@batchwise/client), concurrent single-sentence requests: the same labels', async () => {
      const results = await Promise.all(
        TEXTS.map((text) =>
          http.infer({ model: 'text_classification', inputs: [{ name: 'text', datatype: 'BYTES', shape: [1, 1], data: [text] }] }),
        ),
      );
      expect(results.map((r) => firstLabels(r)[0])).toEqual(EXPECTED_LABELS);
    });
  });

  describe('text_classification_py (tokenizer and postprocess as Python model.py files) against text_classification', () => {
    const LONG = Array(12).fill('Great acting, but the plot was a boring mess.').join(' ');
    // No NUL or invalid UTF-8 here: the server refuses such BYTES before a Python model as before an ONNX one
    // (request-validation), while both tokenizers would drop them alike.
    const EDGE_CASES = [
      '',
      ' \t\n ',
      'Amazíng FILM, ÜBER-wonderful!! Ça ne va pas… «terrible» ¿boring?',
      '好movie 電影 😀🎬 ΣΊΣΥΦΟΣ İstanbul straße ﬁlm Ⅷ',
      'loved\u0001 it\u200b \u00ad\u0085 great\u3000movie \ufffd',
      'مرحبا бесподобный פילם 映画はすばらしい',
      'xylophone playz ' + 'a'.repeat(101) + ' wonderfully',
      LONG,
      `${LONG} I love this wonderful movie`,
    ];
    /** A deterministic mix of vocabulary words, punctuation, accents and scripts (all assigned since Unicode 6). */
    const generated = (count: number): string[] => {
      const pieces = [
        'good',
        'BAD',
        'movie',
        'Wonderful',
        'boring',
        'ly',
        'ed',
        'ing',
        '.',
        ',',
        '!',
        "'",
        '$',
        '-',
        ' ',
        ' ',
        '\t',
        'é',
        'Ü',
        'ñ',
        'ß',
        '好',
        '😀',
        'Ω',
        'ж',
        '\u0301',
        '\u00a0',
        '\u2028',
        '7',
      ];
      let seed = 7;
      const next = () => (seed = (seed * 48271) % 2147483647);
      return Array.from({ length: count }, () => Array.from({ length: next() % 40 }, () => pieces[next() % pieces.length]).join(''));
    };
    const TEXTS_PY = [...TEXTS, ...EDGE_CASES];
    const answer = async (model: string, texts: readonly string[]) => {
      const result = await http.infer({ model, inputs: [{ name: 'text', datatype: 'BYTES', shape: [texts.length, 1], data: texts }] });
      const output = (name: string) => result.outputs.find((o) => o.name === name)!;
      return {
        shape: output('labels').shape,
        labels: (output('labels').data as Uint8Array[]).map((b) => Buffer.from(b).toString()),
        // The scores' bytes: equal only when every float32 is equal bit for bit.
        scores: Buffer.from((output('scores').data as Float32Array).buffer).toString('hex'),
      };
    };

    it("the Python tokenizer gives the JavaScript tokenizer's input_ids and attention_mask", async () => {
      const texts = [...TEXTS_PY, ...generated(300)];
      const tokens = async (model: string) => {
        const outputs: Record<string, number[]> = {};
        for (let start = 0; start < texts.length; start += 64) {
          const rows = texts.slice(start, start + 64);
          const result = await http.infer({ model, inputs: [{ name: 'text', datatype: 'BYTES', shape: [rows.length, 1], data: rows }] });
          for (const o of result.outputs) (outputs[o.name] ??= []).push(...Array.from(o.data as BigInt64Array, Number));
          expect(result.outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([
            ['input_ids', 'INT64', [rows.length, 16]],
            ['attention_mask', 'INT64', [rows.length, 16]],
          ]);
        }
        return outputs;
      };
      const [js, py] = await Promise.all([tokens('tokenizer'), tokens('tokenizer_py')]);
      expect(py).toEqual(js);
      expect(js.attention_mask.slice(0, 16).reduce((a, b) => a + b)).toBe(7); // [CLS] i love this wonderful movie [SEP]
    });

    it('the same labels and scores bit for bit: the sentences, empty, unicode and text past max_sequence_length', async () => {
      for (const text of TEXTS_PY) {
        const [js, py] = await Promise.all([answer('text_classification', [text]), answer('text_classification_py', [text])]);
        expect(py, String(text)).toEqual(js);
      }
      expect((await answer('text_classification_py', TEXTS)).labels.filter((_, i) => i % 3 === 0)).toEqual(EXPECTED_LABELS);
    });

    it('a batch of 16 in one request, and 64 concurrent requests that batch together: the same answers', async () => {
      const sixteen = [...TEXTS_PY, ...generated(16 - TEXTS_PY.length)];
      const [js, py] = await Promise.all([answer('text_classification', sixteen), answer('text_classification_py', sixteen)]);
      expect(py.shape).toEqual([16, 3]);
      expect(py).toEqual(js);
      const many = generated(64);
      const concurrent = (model: string) => Promise.all(many.map((text) => answer(model, [text])));
      expect(await concurrent('text_classification_py')).toEqual(await concurrent('text_classification'));
    });
  });

  describe('image_classification', () => {
    const redAndBlue = png(48, 40, (x) => (x < 36 ? RED : BLUE));

    it('HTTP binary: a PNG file gives the top-k labels ONNX Runtime gives in-process for the same pixels', async () => {
      const expected = await inProcessImageLabels(redAndBlue);
      expect(expected.labels.slice(0, 2)).toEqual(['red', 'blue']);
      const image = bytesTensor([redAndBlue]);
      const response = await postBinary(
        `${server.url}/v2/models/image_classification/infer`,
        {
          inputs: [{ name: 'image', datatype: 'BYTES', shape: [1, 1], parameters: { binary_data_size: image.length } }],
          outputs: [
            { name: 'labels', parameters: { binary_data: false } },
            { name: 'scores', parameters: { binary_data: false } },
          ],
        },
        [image],
      );
      expect(response.status).toBe(200);
      const { json } = splitBinaryResponse(response);
      const output = (name: string) => json.outputs.find((o: { name: string }) => o.name === name);
      expect(output('labels')).toMatchObject({ shape: [1, 3], data: expected.labels });
      output('scores').data.forEach((score: number, i: number) => expect(score).toBeCloseTo(expected.scores[i], 5));
    });

    it('@batchwise/client over HTTP and gRPC: a JPEG and a PNG in one request', async () => {
      const files = [jpegFile(20, 20, () => BLUE), png(10, 10, () => RED)];
      const request = {
        model: 'image_classification',
        inputs: [{ name: 'image', datatype: 'BYTES' as const, shape: [2, 1], data: files }],
      };
      expect(firstLabels(await http.infer(request))).toEqual(['blue', 'red']);
      expect(firstLabels(await grpc.infer(request))).toEqual(['blue', 'red']);
    });

    it('a file that is not an image fails with 400 naming why, and the pipeline keeps serving', async () => {
      const response = await postJson(`${server.url}/v2/models/image_classification/infer`, {
        inputs: [{ name: 'image', datatype: 'BYTES', shape: [1, 1], data: ['not an image'] }],
      });
      expect(response.status).toBe(400);
      expect(response.json.error).toContain('image is neither PNG nor JPEG');
      expect(
        firstLabels(
          await http.infer({
            model: 'image_classification',
            inputs: [{ name: 'image', datatype: 'BYTES', shape: [1, 1], data: [redAndBlue] }],
          }),
        ),
      ).toEqual(['red']);
    });
  });

  describe('bls_router', () => {
    const route = (values: number[]) =>
      http.infer({ model: 'bls_router', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, values.length], data: values }] });
    const version = (result: InferResult) =>
      Buffer.from((result.outputs.find((o) => o.name === 'VERSION')!.data as Uint8Array[])[0]).toString();
    const values = (result: InferResult) => Array.from(result.outputs.find((o) => o.name === 'OUTPUT0')!.data as Float32Array);

    it('sends small inputs to scaler version 1 (x2) and large ones to version 2 (x0.5)', async () => {
      const [small, large, edge] = await Promise.all([route([1, -2, 3]), route([500, 4]), route([100])]);
      expect([version(small), values(small)]).toEqual(['1', [2, -4, 6]]);
      expect([version(large), values(large)]).toEqual(['2', [250, 2]]);
      expect([version(edge), values(edge)]).toEqual(['1', [200]]);
    });

    it('over gRPC too', async () => {
      const result = await grpc.infer({
        model: 'bls_router',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: [-1000, 0] }],
      });
      expect([version(result), values(result)]).toEqual(['2', [-500, 0]]);
    });
  });

  describe("Triton's simple_string, simple_int8 and simple_identity, as its client examples call them", () => {
    const numbers = Array.from({ length: 16 }, (_, i) => i * 7 - 50);
    const ones = numbers.map(() => 1);
    const strings = (values: readonly number[]) => values.map((v) => String(v));
    const texts = (result: InferResult, name: string) =>
      (result.outputs.find((o) => o.name === name)!.data as Uint8Array[]).map((b) => Buffer.from(b).toString());
    const int8s = (result: InferResult, name: string) => Array.from(result.outputs.find((o) => o.name === name)!.data as Int8Array);

    /** The model's outputs from ONNX Runtime in-process on the same inputs. */
    async function inProcess(model: string, feeds: Record<string, unknown>): Promise<Record<string, unknown[]>> {
      const ort = loadOrt();
      const session = await ort.InferenceSession.create(await readFile(join(EXAMPLES, model, '1', 'model.onnx')));
      const results = await session.run(feeds as never);
      await session.release();
      return Object.fromEntries(Object.entries(results).map(([name, t]) => [name, Array.from(t.data as ArrayLike<unknown>)]));
    }

    it('simple_string: decimal strings summed and subtracted over HTTP JSON, HTTP binary and gRPC, as ONNX Runtime gives', async () => {
      const ort = loadOrt();
      const expected = await inProcess('simple_string', {
        INPUT0: new ort.Tensor('string', strings(numbers), [1, 16]),
        INPUT1: new ort.Tensor('string', strings(ones), [1, 16]),
      });
      expect(expected['OUTPUT0']).toEqual(strings(numbers.map((n) => n + 1)));
      const request = {
        model: 'simple_string',
        inputs: [
          { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], data: strings(numbers) },
          { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], data: strings(ones) },
        ],
      } as const;
      const json = await postJson(`${server.url}/v2/models/simple_string/infer`, {
        inputs: request.inputs.map(({ name, datatype, shape, data }) => ({ name, datatype, shape, data })),
      });
      expect(json.status).toBe(200);
      const jsonOutput = (name: string) => json.json.outputs.find((o: { name: string }) => o.name === name).data;
      for (const result of [await http.infer(request), await grpc.infer(request)]) {
        expect([texts(result, 'OUTPUT0'), texts(result, 'OUTPUT1')]).toEqual([expected['OUTPUT0'], expected['OUTPUT1']]);
      }
      expect([jsonOutput('OUTPUT0'), jsonOutput('OUTPUT1')]).toEqual([expected['OUTPUT0'], expected['OUTPUT1']]);
    });

    it('simple_int8: INT8 summed and subtracted, over HTTP binary and gRPC, as ONNX Runtime gives (wrapping at the ends)', async () => {
      const ort = loadOrt();
      const a = Int8Array.from([127, -128, 100, -100, 0, 1, -1, 5, 60, -60, 120, -120, 7, 8, 9, 10]);
      const b = Int8Array.from([1, 1, 100, 100, 0, -1, 1, 5, 70, -70, 10, 10, 7, 8, 9, 10]);
      const expected = await inProcess('simple_int8', {
        INPUT0: new ort.Tensor('int8', a, [1, 16]),
        INPUT1: new ort.Tensor('int8', b, [1, 16]),
      });
      expect(expected['OUTPUT0']!.slice(0, 2)).toEqual([-128, -127]);
      const request = {
        model: 'simple_int8',
        inputs: [
          { name: 'INPUT0', datatype: 'INT8', shape: [1, 16], data: a },
          { name: 'INPUT1', datatype: 'INT8', shape: [1, 16], data: b },
        ],
      } as const;
      for (const result of [await http.infer(request), await grpc.infer(request)]) {
        expect([int8s(result, 'OUTPUT0'), int8s(result, 'OUTPUT1')]).toEqual([expected['OUTPUT0'], expected['OUTPUT1']]);
      }
    });

    it('simple_identity (Python): strings with NUL and bytes that are not UTF-8 come back as sent', async () => {
      const elements = [Buffer.from('he\0llo'), Buffer.from([0, 1, 2, 3]), Buffer.from('')];
      const request = { model: 'simple_identity', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 3], data: elements }] } as const;
      for (const result of [await http.infer(request), await grpc.infer(request)]) {
        expect((result.outputs[0]!.data as Uint8Array[]).map((b) => Buffer.from(b))).toEqual(elements);
      }
    });
  });
});
