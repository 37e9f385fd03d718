import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { isReady, postBinary, startTestServer } from './support/server.ts';

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

// A real crash of a model instance's worker thread, through a listening server: a BYTES request
// whose strings outgrow the worker's JavaScript heap limit (worker resourceLimits) kills that
// worker alone (ERR_WORKER_OUT_OF_MEMORY), in the middle of its batch.
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
  // Two million strings (and their views) need several times the 64 MiB heap.
  const crash = () => infer(2_000_000);

  it('fails only its batch with a 500 naming the model; the instance is replaced and the model stays ready', async () => {
    expect((await infer(4)).status).toBe(200);
    const crashed = await crash();
    expect(crashed.status).toBe(500);
    expect(JSON.parse(crashed.body.toString()).error).toMatch(/model instance of 'bytes' crashed .*the batch it was running failed/);
    expect((await fetch(`${server.url}/v2/models/bytes/ready`)).status).toBe(200);
    expect((await infer(4)).status).toBe(200);
    expect(await isReady(server.url)).toBe(true);
  });

  it('after repeated crashes, marks the model UNAVAILABLE with the reason', async () => {
    // Crashes until the model leaves service: the fourth within the crash window (three are tolerated).
    const ready = async () => (await fetch(`${server.url}/v2/models/bytes/ready`)).status === 200;
    for (let i = 0; i < 4 && (await ready()); i++) expect((await crash()).status).toBe(500);
    const row = (await postIndex()).find((r) => r.name === 'bytes')!;
    expect(row.state).toBe('UNAVAILABLE');
    expect(row.reason).toMatch(/crashed 4 times in 60 s .*not restarted/);
    expect((await fetch(`${server.url}/v2/models/bytes/ready`)).status).toBe(400);
  });

  const postIndex = async () =>
    (await (
      await fetch(`${server.url}/v2/repository/index`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    ).json()) as { name: string; state: string; reason: string }[];
});
