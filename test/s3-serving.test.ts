import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { pino } from 'pino';
import { modelsCommand } from '../packages/server/src/cli/models/index.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, serializeModel } from '@batchwise/modelgen';
import { postJson, startTestServer } from './support/server.ts';
import { startTestS3, useS3rverCredentials, type TestS3 } from './support/s3.ts';
import { waitFor } from './support/wait-for.ts';

const BUCKET = 'models';
const CONFIG = `
name: "m"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
`;

describe('serving from S3 (s3rver on 127.0.0.1) in poll mode', () => {
  let dir: string;
  let s3: TestS3;
  let port: number;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  const startS3 = async (p = 0) => {
    s3 = await startTestS3(join(dir, 's3'), p, BUCKET);
    port = s3.port;
  };
  const put = (key: string, body: Uint8Array | string) => s3.put(`prod/${key}`, body);
  const infer = () =>
    postJson(`${server.url}/v2/models/m/infer`, { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
  const index = async () => (await postJson(`${server.url}/v2/repository/index`, {})).json as any[];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-s3serve-'));
    await startS3();
    // The server finds credentials through the SDK's default provider chain, as an ECS task role would.
    useS3rverCredentials();
    await put('m/config.pbtxt', CONFIG);
    await put('m/1/model.onnx', serializeModel(identity('FP32', [4])));
    server = await startTestServer([`s3://127.0.0.1:${port}/${BUCKET}/prod`], { modelControlMode: 'poll', repositoryPollSecs: 1 });
  });
  afterAll(async () => {
    await server?.close();
    await s3?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('serves the model it downloaded', async () => {
    const { status, json } = await infer();
    expect(status).toBe(200);
    expect(json.model_version).toBe('1');
  });

  it('serves a newly uploaded version found by one of the first two polls after it (counted in polls), without failing a request', async () => {
    let stop = false;
    const failures: unknown[] = [];
    const load = (async () => {
      while (!stop) {
        const r = await infer();
        if (r.status !== 200) failures.push(r.json);
      }
    })();
    await put('m/2/model.onnx', serializeModel(identity('FP32', [4])));
    const uploaded = s3.requests.length;
    // Counted in polls, not milliseconds (a loaded machine stretches every step): the server lists the
    // bucket once a poll, and the listing that finds version 2 is the one after which it downloads it.
    // The wait is only a cap for a server that stopped polling (the interval here is 1 s).
    await waitFor(async () => (await infer()).json?.model_version === '2', 15_000, 'version 2 served');
    stop = true;
    await load;
    expect(failures).toEqual([]);
    const after = s3.requests.slice(uploaded);
    const downloaded = after.findIndex((r) => r.method === 'GET' && r.url.startsWith(`/${BUCKET}/prod/m/2/model.onnx`));
    expect(downloaded).toBeGreaterThan(0);
    const listings = after.slice(0, downloaded).filter((r) => r.method === 'GET' && r.url.includes('list-type=2'));
    expect(listings.length).toBeGreaterThanOrEqual(1);
    expect(listings.length).toBeLessThanOrEqual(2);
  });

  it('keeps serving when a corrupt version arrives, shows why, and picks up the next good one', async () => {
    await put('m/3/model.onnx', Buffer.from('truncated upload'));
    await waitFor(async () => (await index()).some((r) => r.version === '3' && r.state === 'UNAVAILABLE'), 10_000);
    expect((await infer()).json.model_version).toBe('2');
    await put('m/4/model.onnx', serializeModel(identity('FP32', [4])));
    await waitFor(async () => (await infer()).json?.model_version === '4', 10_000);
  });

  it('keeps serving while S3 is down, and resumes polling when it is back', async () => {
    await s3.close();
    await new Promise((r) => setTimeout(r, 2500));
    expect((await infer()).status).toBe(200);
    expect((await fetch(`${server.url}/v2/health/ready`)).status).toBe(200);
    await startS3(port);
    await put('m/5/model.onnx', serializeModel(identity('FP32', [4])));
    await waitFor(async () => (await infer()).json?.model_version === '5', 15_000);
  });
  it('follows `batchwise models promote` and `rollback` under load without failing a request', async () => {
    const location = `s3://127.0.0.1:${port}/${BUCKET}/prod`;
    const models = (args: string[]) => {
      const command = modelsCommand({ write: () => undefined, logger: pino({ level: 'silent' }) });
      command.exitOverride();
      return command.parseAsync(args, { from: 'user' });
    };
    const artifact = join(dir, 'candidate.onnx');
    await writeFile(artifact, serializeModel(identity('FP32', [4])));
    let stop = false;
    const failures: unknown[] = [];
    const load = (async () => {
      while (!stop) {
        const r = await infer();
        if (r.status !== 200) failures.push(r.json);
      }
    })();
    try {
      // Versions 1-5 exist: the promotion uploads 6 and points the config at it.
      await models(['promote', '--model-repository', location, '--model', 'm', '--file', artifact, '--actor', 'ci']);
      await waitFor(async () => (await infer()).json?.model_version === '6', 10_000);
      await models(['rollback', '--model-repository', location, '--model', 'm']);
      // Back to exactly the version that served before the promotion (5, not merely "not 6").
      await waitFor(async () => (await infer()).json?.model_version === '5', 10_000);
      expect((await infer()).json.model_version).toBe('5');
    } finally {
      stop = true;
      await load;
    }
    expect(failures).toEqual([]);
  });
});
