import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, serializeModel } from '@batchwise/modelgen';
import type { SessionSettings } from '../backend.ts';
import { onnxRuntimeBackend } from './onnxruntime-backend.ts';

const threadCount = (): number => readdirSync('/proc/self/task').length;

/**
 * ONNX Runtime does not report a session's options back, but its intra-op pool is visible: a
 * session with N intra-op threads starts N - 1 threads of its own (the caller is the Nth).
 */
describe.skipIf(!existsSync('/proc/self/task'))('intra_op_thread_count reaches the ONNX Runtime session', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-threads-'));
    await writeFile(join(dir, 'id.onnx'), serializeModel(identity('FP32', [4])));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  async function threadsStartedBy(sessionOptions: SessionSettings): Promise<number> {
    const before = threadCount();
    const { instance } = await onnxRuntimeBackend.createInstance({
      modelName: 'threads',
      modelPath: join(dir, 'id.onnx'),
      device: 'cpu',
      deviceId: 0,
      allowCpuFallback: false,
      sessionOptions,
    });
    const started = threadCount() - before;
    await instance.close();
    return started;
  }

  it('starts 11 more threads with 12 intra-op threads than with 1 (8 or more, allowing for stray exits)', async () => {
    await threadsStartedBy({}); // the first worker also starts what every later one shares
    const one = await threadsStartedBy({ intraOpThreads: 1 });
    const twelve = await threadsStartedBy({ intraOpThreads: 12 });
    // Were the setting ignored, both sessions would get ORT's default pool and the difference
    // would be about 0; the margin below 11 absorbs a closed worker's thread leaving late.
    expect(twelve - one).toBeGreaterThanOrEqual(8);
  });
});
