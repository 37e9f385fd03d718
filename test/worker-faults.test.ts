import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { isReady, postBinary, startTestServer } from './support/server.ts';
import type { LoadedVersion } from '../packages/server/src/models/loaded-version.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const MiB = 1024 * 1024;

const config = `name: "bytes"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]`;

/** `count` BYTES elements of 8 letters each, serialized as the binary tensor extension sends them. */
function bytesElements(count: number): Uint8Array {
  const buffer = Buffer.alloc(count * 12);
  for (let i = 0; i < count; i++) {
    buffer.writeUInt32LE(8, i * 12);
    buffer.write('abcdefgh', i * 12 + 4, 'latin1');
  }
  return buffer;
}

// A BYTES request whose strings would outgrow the worker's JavaScript heap limit (worker
// resourceLimits) used to kill that worker in the middle of its batch; it is now refused before
// it reaches the worker (issue 21). A worker that dies anyway (a native crash) is killed here
// between runs, as one would die (terminating it inside a native run would abort the process).
describe('a model instance whose worker dies', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([{ name: 'bytes', model: identity('STRING', [-1]), config }]);
    remove = repo.remove;
    server = await startTestServer([repo.dir], {
      memoryLimit: String(process.memoryUsage.rss() + 768 * MiB),
      workerHeapLimitBytes: 64 * MiB,
    });
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const infer = (count: number) => {
    const data = bytesElements(count);
    return postBinary(
      `${server.url}/v2/models/bytes/infer`,
      {
        inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, count], parameters: { binary_data_size: data.length } }],
        parameters: { binary_data_output: true },
      },
      [data],
    );
  };
  // Two million strings need several times the 64 MiB heap.
  const tooMany = () => infer(2_000_000);
  const crash = async () => {
    const model = (server.service as unknown as { models: { resolve(name: string): LoadedVersion } }).models.resolve('bytes');
    await (model.instances[0] as unknown as { crashForTesting(): Promise<number> }).crashForTesting();
  };

  it('a request whose strings would outgrow the worker heap gets a 400 naming them; the worker lives on', async () => {
    expect((await infer(4)).status).toBe(200);
    const refused = await tooMany();
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body.toString()).error).toMatch(/2000000 BYTES elements .* JavaScript heap .* a batch may take \d+/);
    expect((await infer(4)).status).toBe(200);
  });

  it('is replaced when it dies, and the model stays ready', async () => {
    await crash();
    expect((await fetch(`${server.url}/v2/models/bytes/ready`)).status).toBe(200);
    expect((await infer(4)).status).toBe(200);
    expect(await isReady(server.url)).toBe(true);
  });

  it('after repeated crashes, marks the model UNAVAILABLE with the reason', async () => {
    // Crashes until the model leaves service: the fourth within the crash window (three are tolerated).
    const ready = async () => (await fetch(`${server.url}/v2/models/bytes/ready`)).status === 200;
    for (let i = 0; i < 4 && (await ready()); i++) {
      expect((await infer(4)).status).toBe(200);
      await crash();
    }
    const row = async () => (await postIndex()).find((r) => r.name === 'bytes')!;
    await expect.poll(async () => (await row()).state).toBe('UNAVAILABLE');
    expect((await row()).reason).toMatch(/crashed 4 times in 60 s .*not restarted/);
    expect((await fetch(`${server.url}/v2/models/bytes/ready`)).status).toBe(400);
  });

  const postIndex = async () =>
    (await (
      await fetch(`${server.url}/v2/repository/index`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    ).json()) as { name: string; state: string; reason: string }[];
});
