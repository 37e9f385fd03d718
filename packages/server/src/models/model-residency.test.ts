import { describe, expect, it } from 'vitest';
import { INSTANCE_WORKER_BYTES, modelFootprint, workerShareOf, type ModelFootprint } from '../memory/model-footprint.ts';
import { ModelResidency, type EvictionHost, type ModelMemoryHold } from './model-residency.ts';

/** Footprints of these sizes (the residency's arithmetic, not modelFootprint's estimate, is under test here). */
const cpu = (bytes: number): ModelFootprint => ({
  hostBytes: bytes,
  gpuBytes: new Map(),
  description: `${bytes} bytes of weights x 1 CPU instance`,
});
const gpu = (bytes: number, deviceId: number): ModelFootprint => ({
  hostBytes: 0,
  gpuBytes: new Map([[deviceId, bytes]]),
  description: `${bytes} bytes of weights x 0 CPU instances and 1 GPU instance`,
});

interface FakeModel {
  lastUse: number;
  evictable: boolean;
  pinned: boolean;
  hold?: ModelMemoryHold;
}

/** A model manager of plain records: evicting one gives its memory back at once. */
function fakeHost(models: Record<string, FakeModel>): EvictionHost & { evicted: string[] } {
  const evicted: string[] = [];
  return {
    evicted,
    *evictable() {
      for (const [name, m] of Object.entries(models)) if (m.evictable && m.hold) yield { name, lastUse: m.lastUse };
    },
    isPinned: (name) => models[name]?.pinned ?? false,
    async evict(name) {
      const m = models[name]!;
      if (!m.evictable) return false;
      evicted.push(name);
      m.hold!.release();
      delete m.hold;
      return true;
    },
  };
}

async function load(residency: ModelResidency, models: Record<string, FakeModel>, name: string, bytes = 100): Promise<void> {
  models[name] ??= { lastUse: 0, evictable: true, pinned: false };
  models[name].hold = await residency.reserve(name, '1', cpu(bytes));
}

describe('ModelResidency', () => {
  it('holds footprints within the limit without evicting, and gives them back once', async () => {
    const models: Record<string, FakeModel> = {};
    const host = fakeHost(models);
    const residency = new ModelResidency({ hostBytes: 300, roomWaitMs: 1000 }, host);
    await load(residency, models, 'a');
    await load(residency, models, 'b');
    expect(residency.hostBytes).toBe(200);
    models['a']!.hold!.release();
    models['a']!.hold!.release();
    expect(residency.hostBytes).toBe(100);
    expect(host.evicted).toEqual([]);
  });

  it('evicts the least recently used model that may be evicted until the new one fits', async () => {
    const models: Record<string, FakeModel> = {};
    const host = fakeHost(models);
    const residency = new ModelResidency({ hostBytes: 300, roomWaitMs: 1000 }, host);
    for (const name of ['a', 'b', 'c']) await load(residency, models, name);
    Object.assign(models['a']!, { lastUse: 5 });
    Object.assign(models['b']!, { lastUse: 1, evictable: false }); // in use: skipped
    Object.assign(models['c']!, { lastUse: 3 });
    await load(residency, models, 'd', 150);
    expect(host.evicted).toEqual(['c', 'a']);
    expect(residency.hostBytes).toBe(250);
  });

  it('refuses a model larger than the limit, naming both sizes', async () => {
    const residency = new ModelResidency({ hostBytes: 300, gpuBytesPerDevice: 50, roomWaitMs: 1000 }, fakeHost({}));
    await expect(residency.reserve('big', '2', cpu(301))).rejects.toThrow(
      "model 'big' version 2 needs about 301 bytes of host memory (301 bytes of weights x 1 CPU instance), more than the 300 bytes of --model-memory-limit",
    );
    await expect(residency.reserve('big', '2', gpu(60, 1))).rejects.toThrow(
      'needs about 60 bytes of memory on GPU 1 (60 bytes of weights x 0 CPU instances and 1 GPU instance), more than the 50 bytes --model-gpu-memory-limit allows on each GPU',
    );
  });

  it('fails at once when the pinned models leave no room, and waits for models in use otherwise', async () => {
    const models: Record<string, FakeModel> = {
      pinned: { lastUse: 0, evictable: false, pinned: true },
      busy: { lastUse: 0, evictable: false, pinned: false },
    };
    const residency = new ModelResidency({ hostBytes: 300, roomWaitMs: 2000 }, fakeHost(models));
    await load(residency, models, 'pinned', 200);
    await expect(residency.reserve('x', '1', cpu(150))).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: expect.stringContaining('the pinned models (--load-model, load requests) hold 200 of the 300 bytes of --model-memory-limit'),
    });
    await load(residency, models, 'busy', 100);
    const waiting = residency.reserve('y', '1', cpu(100));
    setTimeout(() => (models['busy']!.evictable = true), 50);
    await expect(waiting).resolves.toBeDefined();
    expect(residency.hostBytes).toBe(300);
  });

  it('gives up with UNAVAILABLE when models in use keep the room past the wait', async () => {
    const models: Record<string, FakeModel> = { busy: { lastUse: 0, evictable: false, pinned: false } };
    const residency = new ModelResidency({ hostBytes: 100, roomWaitMs: 60 }, fakeHost(models));
    await load(residency, models, 'busy', 100);
    await expect(residency.reserve('x', '1', cpu(10))).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringContaining('none could be evicted within 0.06 s (--model-memory-limit)'),
    });
  });

  it('makes room on a GPU only by evicting models that hold memory on it', async () => {
    const models: Record<string, FakeModel> = {};
    const host = fakeHost(models);
    const residency = new ModelResidency({ gpuBytesPerDevice: 100, roomWaitMs: 1000 }, host);
    models['on0'] = { lastUse: 1, evictable: true, pinned: false, hold: await residency.reserve('on0', '1', gpu(80, 0)) };
    models['on1'] = { lastUse: 2, evictable: true, pinned: false, hold: await residency.reserve('on1', '1', gpu(80, 1)) };
    await residency.reserve('new', '1', gpu(50, 1));
    expect(host.evicted).toEqual(['on1']);
    expect([...residency.gpuBytes]).toEqual([
      [0, 80],
      [1, 50],
    ]);
  });

  it('takes back what a version gives back once open, and no more than it holds', async () => {
    const models: Record<string, FakeModel> = {};
    const residency = new ModelResidency({ hostBytes: 300, roomWaitMs: 1000 }, fakeHost(models));
    const hold = await residency.reserve('m', '1', cpu(200));
    hold.giveBack(50);
    expect(residency.hostBytes).toBe(150);
    // The room given back takes another model without an eviction.
    await load(residency, models, 'other', 150);
    hold.giveBack(1000);
    expect(residency.hostBytes).toBe(150);
    hold.release();
    expect(residency.hostBytes).toBe(150);
  });
});

describe('GPU memory measured once open (a Python model on a GPU)', () => {
  it('is held on its device: a later load that no longer fits evicts it, and its release frees it', async () => {
    const models: Record<string, FakeModel> = { python: { lastUse: 0, evictable: true, pinned: false } };
    const host = fakeHost(models);
    const residency = new ModelResidency({ gpuBytesPerDevice: 100, roomWaitMs: 1000 }, host);
    const hold = await residency.reserve('python', '1', cpu(0));
    models['python']!.hold = hold;
    hold.holdMeasuredGpu(new Map([[1, 70]]));
    expect([...residency.gpuBytes]).toEqual([[1, 70]]);
    // Room on another GPU: nothing is evicted.
    models['onnx0'] = { lastUse: 1, evictable: true, pinned: false, hold: await residency.reserve('onnx0', '1', gpu(60, 0)) };
    expect(host.evicted).toEqual([]);
    // On its own GPU the measured 70 bytes leave no room for 60: the Python model is evicted for it.
    models['onnx1'] = { lastUse: 2, evictable: true, pinned: false, hold: await residency.reserve('onnx1', '1', gpu(60, 1)) };
    expect(host.evicted).toEqual(['python']);
    expect([...residency.gpuBytes].sort()).toEqual([
      [0, 60],
      [1, 60],
    ]);
    // Released already: a late measurement adds nothing.
    hold.holdMeasuredGpu(new Map([[1, 70]]));
    expect(residency.gpuBytes.get(1)).toBe(60);
  });
});

describe('modelFootprint: what a version counts against --model-memory-limit', () => {
  it("counts each instance's worker thread beside each CPU session's weights", () => {
    const two = modelFootprint(
      1000,
      [
        { device: 'cpu', deviceId: 0 },
        { device: 'cpu', deviceId: 0 },
      ],
      true,
    );
    expect(two.hostBytes).toBe(2 * 1000 + 2 * INSTANCE_WORKER_BYTES);
    expect(two.description).toBe(`1000 bytes of weights x 2 CPU instances, and 2 worker threads of ${INSTANCE_WORKER_BYTES} bytes`);
  });

  it('keeps GPU weights on the GPU and a JavaScript model at its workers, and gives a worker back per instance on the event loop', () => {
    const onGpu = modelFootprint(1000, [{ device: 'gpu', deviceId: 1 }], true);
    expect(onGpu.hostBytes).toBe(INSTANCE_WORKER_BYTES);
    expect([...onGpu.gpuBytes]).toEqual([[1, 1000]]);
    const js = modelFootprint(1000, [{ device: 'cpu', deviceId: 0 }], false);
    expect(js).toEqual({
      hostBytes: INSTANCE_WORKER_BYTES,
      gpuBytes: new Map(),
      description: `no ONNX Runtime sessions, 1 worker thread of ${INSTANCE_WORKER_BYTES} bytes`,
    });
    expect(workerShareOf(2)).toBe(2 * INSTANCE_WORKER_BYTES);
  });
});
