import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mlp, serializeModel } from '@batchwise/modelgen';
import { createSyncSession, syncSessionsAvailable } from './native-session.ts';
import { ortSessionOptions } from './session-options.ts';

const WIDTH = 16;

describe('a synchronous ONNX Runtime session (the binding under onnxruntime-node)', () => {
  let dir: string;
  let file: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-native-session-'));
    file = join(dir, 'mlp.onnx');
    await writeFile(file, serializeModel(mlp({ layers: 3, width: WIDTH })));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  // onnxruntime-node is pinned: an upgrade that moves its binding fails here, not in production.
  it('exists in this onnxruntime-node', () => {
    expect(syncSessionsAvailable()).toBe(true);
  });

  it('answers as the public InferenceSession does, bit for bit, at several batch sizes', async () => {
    const options = ortSessionOptions({}, 'cpu', 0);
    const sync = createSyncSession(file, options)!;
    const session = await ort.InferenceSession.create(file, options);
    try {
      for (const rows of [1, 3, 64]) {
        const input = Float32Array.from({ length: rows * WIDTH }, (_, i) => Math.cos(i * 0.37) * 5);
        const feeds = () => ({ INPUT0: new ort.Tensor('float32', input.slice(), [rows, WIDTH]) });
        const expected = (await session.run(feeds()))['OUTPUT0']!;
        const got = sync.run(feeds(), ['OUTPUT0'])['OUTPUT0']!;
        expect(got.dims).toEqual(expected.dims);
        expect(got.type).toBe('float32');
        expect(Array.from(got.data as Float32Array)).toEqual(Array.from(expected.data as Float32Array));
      }
    } finally {
      sync.release();
      await session.release();
    }
  });

  it('throws ONNX Runtime’s error for a run it refuses, and runs again after it', () => {
    const sync = createSyncSession(file, ortSessionOptions({}, 'cpu', 0))!;
    try {
      expect(() => sync.run({ INPUT0: new ort.Tensor('float32', new Float32Array(WIDTH + 1), [1, WIDTH + 1]) }, ['OUTPUT0'])).toThrow(
        /dimension/i,
      );
      expect(sync.run({ INPUT0: new ort.Tensor('float32', new Float32Array(WIDTH), [1, WIDTH]) }, ['OUTPUT0'])['OUTPUT0']!.dims).toEqual([
        1,
        WIDTH,
      ]);
    } finally {
      sync.release();
    }
  });

  it('fails to load a file that is not a model, saying so', () => {
    expect(() => createSyncSession(join(dir, 'missing.onnx'), ortSessionOptions({}, 'cpu', 0))).toThrow(/missing\.onnx/);
  });
});
