/**
 * The text_classification pipeline run in-process, step by step as the ensemble chains them:
 * the committed tokenizer model on strings, the generated encoder and classifier in ONNX
 * Runtime on its ids, the committed postprocess bundle on the logits.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ModelError, tensor, type JsModel } from '@batchwise/backend';
import { loadOrt, type OrtSession } from '@batchwise/modelgen/test-support/ort.ts';
import { SENTENCES } from '../test-support/sentences.ts';
import { EXAMPLE_REPOSITORY, execute, loadExampleJsModel, outputsOf, request } from '../test-support/js-model.ts';

describe('text_classification in-process', () => {
  let tokenizer: JsModel;
  let postprocess: JsModel;
  let encoder: OrtSession;
  let classifier: OrtSession;
  beforeAll(async () => {
    const ort = loadOrt();
    const session = async (name: string) => ort.InferenceSession.create(await readFile(join(EXAMPLE_REPOSITORY, name, '1', 'model.onnx')));
    [tokenizer, postprocess, encoder, classifier] = await Promise.all([
      loadExampleJsModel('tokenizer'),
      loadExampleJsModel('postprocess'),
      session('encoder'),
      session('classifier'),
    ]);
  });

  it('gives each sentence its expected label, most likely first, all three ranked', async () => {
    const ort = loadOrt();
    const texts = Object.keys(SENTENCES);
    const [tokens] = await execute(tokenizer, [request([tensor('text', 'BYTES', [texts.length, 1], texts)])]);
    const { input_ids, attention_mask } = outputsOf(tokens);
    expect(input_ids.shape).toEqual([texts.length, 16]);
    const { embedding } = await encoder.run({
      input_ids: new ort.Tensor('int64', input_ids.data, input_ids.shape),
      attention_mask: new ort.Tensor('int64', attention_mask.data, attention_mask.shape),
    });
    const { logits } = await classifier.run({ embedding });
    const [ranked] = await execute(postprocess, [request([tensor('logits', 'FP32', logits.dims, logits.data as Float32Array)])]);
    const { labels, scores } = outputsOf(ranked);
    expect(labels.shape).toEqual([texts.length, 3]);
    const names = (labels.data as Buffer[]).map(String);
    texts.forEach((text, row) => {
      expect(names[row * 3], text).toBe(SENTENCES[text]);
      expect(new Set(names.slice(row * 3, row * 3 + 3))).toEqual(new Set(['negative', 'neutral', 'positive']));
      const [first, second] = (scores.data as Float32Array).subarray(row * 3, row * 3 + 2);
      expect(first).toBeGreaterThan(second);
    });
  });

  it('the tokenizer answers each request of a batch with its own rows', async () => {
    const responses = await execute(tokenizer, [
      request([tensor('text', 'BYTES', [1, 1], ['I love this wonderful movie'])]),
      request([tensor('text', 'BYTES', [2, 1], ['good', ''])]),
    ]);
    expect(responses).toHaveLength(2);
    expect(Array.from(outputsOf(responses[0]).input_ids.data as BigInt64Array).slice(0, 8)).toEqual([
      2n,
      40n,
      166n,
      57n,
      170n,
      125n,
      3n,
      0n,
    ]);
    const second = outputsOf(responses[1]);
    expect(second.input_ids.shape).toEqual([2, 16]);
    expect(Array.from(second.attention_mask.data as BigInt64Array).slice(14, 19)).toEqual([0n, 0n, 1n, 1n, 0n]);
  });

  it('postprocess refuses logits that do not match its labels, for that request alone', async () => {
    const [bad, good] = await execute(postprocess, [
      request([tensor('logits', 'FP32', [1, 2], [0, 1])]),
      request([tensor('logits', 'FP32', [1, 3], [0, 1, 5])]),
    ]);
    expect(bad).toBeInstanceOf(ModelError);
    expect(bad).toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining('[n, 3]') });
    expect((outputsOf(good).labels.data as Buffer[]).map(String)).toEqual(['positive', 'neutral', 'negative']);
  });
});
