/**
 * Image preprocessing on PNG and JPEG files encoded here with pngjs and jpeg-js, the committed
 * image_preprocess bundle run in-process, and color_net in ONNX Runtime naming the colours.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ModelError, tensor } from '@batchwise/backend';
import { loadOrt } from '@batchwise/modelgen/test-support/ort.ts';
import { BLUE, RED, jpegFile, png } from '../../test-support/images.ts';
import { EXAMPLE_REPOSITORY, execute, loadExampleJsModel, outputsOf, request } from '../../test-support/js-model.ts';
import { ImageDecodeError, decodeImage } from './decode.ts';
import { preprocessImage } from './preprocess.ts';

const plane = (pixels: Float32Array, channel: number, size: number) => Array.from(pixels.subarray(channel * size, (channel + 1) * size));

describe('image preprocessing', () => {
  it('a solid PNG becomes constant planes in [-1, 1], channels first', () => {
    const pixels = preprocessImage(
      png(40, 30, () => RED),
      32,
      32,
    );
    expect(pixels).toHaveLength(3 * 32 * 32);
    expect(new Set(plane(pixels, 0, 1024))).toEqual(new Set([1]));
    expect(new Set(plane(pixels, 1, 1024))).toEqual(new Set([-1]));
    expect(new Set(plane(pixels, 2, 1024))).toEqual(new Set([-1]));
  });

  it('resizes bilinearly between pixel centres', () => {
    // A black and a white pixel stretched to 4: centres at -0.25 (clamped), 0.25, 0.75, 1.25 (clamped).
    const pixels = preprocessImage(
      png(2, 1, (x) => (x === 0 ? [0, 0, 0, 255] : [255, 255, 255, 255])),
      4,
      1,
    );
    expect(plane(pixels, 0, 4)).toEqual([-1, -0.5, 0.5, 1]);
  });

  it('composites transparent pixels over white', () => {
    const pixels = preprocessImage(
      png(1, 1, () => [0, 0, 0, 0]),
      1,
      1,
    );
    expect(Array.from(pixels)).toEqual([1, 1, 1]);
  });

  it('a JPEG decodes to its colour within the compression error', () => {
    const pixels = preprocessImage(
      jpegFile(16, 16, () => BLUE),
      32,
      32,
    );
    for (const [channel, expected] of [-1, -1, 1].entries()) {
      for (const v of plane(pixels, channel, 1024)) expect(Math.abs(v - expected)).toBeLessThan(0.05);
    }
  });

  it('refuses what is not PNG or JPEG, and huge images before decoding them', () => {
    expect(() => decodeImage(Buffer.from('GIF89a......'))).toThrow(ImageDecodeError);
    const huge = png(1, 1, () => RED);
    huge.writeUInt32BE(100_000, 16);
    huge.writeUInt32BE(100_000, 20);
    expect(() => decodeImage(huge)).toThrow(/more than/);
    expect(() => decodeImage(png(2, 2, () => RED).subarray(0, 40))).toThrow(/invalid PNG/);
  });

  it('the committed bundle serves a batch: PNG and JPEG rows, and a bad file fails its own request with 400', async () => {
    const model = await loadExampleJsModel('image_preprocess');
    const files = [png(8, 8, () => RED), jpegFile(8, 8, () => BLUE)];
    const [good, bad] = await execute(model, [
      request([tensor('image', 'BYTES', [2, 1], files)]),
      request([tensor('image', 'BYTES', [1, 1], [Buffer.from('not an image')])]),
    ]);
    const { pixels } = outputsOf(good);
    expect(pixels.shape).toEqual([2, 3, 32, 32]);
    expect(Array.from(pixels.data as Float32Array)).toEqual([...preprocessImage(files[0], 32, 32), ...preprocessImage(files[1], 32, 32)]);
    expect(bad).toBeInstanceOf(ModelError);
    expect(bad).toMatchObject({ code: 'INVALID_ARG', message: 'image 0: image is neither PNG nor JPEG' });
  });

  it('color_net and image_postprocess name the dominant colour and its share of the pixels', async () => {
    const ort = loadOrt();
    const net = await ort.InferenceSession.create(await readFile(join(EXAMPLE_REPOSITORY, 'color_net', '1', 'model.onnx')));
    const postprocess = await loadExampleJsModel('image_postprocess');
    // Three quarters red, one quarter blue (the right-hand columns).
    const pixels = preprocessImage(
      png(32, 32, (x) => (x < 24 ? RED : BLUE)),
      32,
      32,
    );
    const { logits } = await net.run({ pixels: new ort.Tensor('float32', pixels, [1, 3, 32, 32]) });
    const [ranked] = await execute(postprocess, [request([tensor('logits', 'FP32', logits.dims, logits.data as Float32Array)])]);
    const { labels, scores } = outputsOf(ranked);
    expect((labels.data as Buffer[]).slice(0, 2).map(String)).toEqual(['red', 'blue']);
    expect(scores.data[0]).toBeCloseTo(0.75, 2);
    expect(scores.data[1]).toBeCloseTo(0.25, 2);
    await net.release();
  });
});
