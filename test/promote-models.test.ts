import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { identity, serializeModel } from '@batchwise/modelgen';
import { pino, type Logger } from 'pino';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsCommand, type ModelStatus } from '../packages/server/src/cli/models/index.ts';
import { parseModelConfig } from '../packages/server/src/config/index.ts';
import { openRepositoryStore } from '../packages/server/src/promotion/repository-store.ts';
import { parseRepositoryLocation, type S3RepositoryLocation } from '../packages/server/src/repository/repository-url.ts';
import { createS3Client } from '../packages/server/src/repository/s3-client.ts';

const CONFIG = `name: "ident"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]
dynamic_batching {}
`;

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** Runs `batchwise models ...` in this process; returns what it printed and logged. */
async function cli(args: string[], onLog?: (line: LogLine) => void): Promise<{ out: string; logs: LogLine[] }> {
  let out = '';
  const logs: LogLine[] = [];
  const logger: Logger = pino(
    { level: 'debug' },
    {
      write: (s: string) => {
        const line = JSON.parse(s) as LogLine;
        logs.push(line);
        onLog?.(line);
      },
    },
  );
  const command = modelsCommand({ write: (t) => void (out += t), logger });
  command.exitOverride();
  command.commands.forEach((c) => c.exitOverride());
  await command.parseAsync(args, { from: 'user' });
  return { out, logs };
}

interface Backend {
  readonly name: string;
  location: string;
  /** Puts a file into the repository by hand (not through promote). */
  put(path: string, body: Buffer | string): Promise<void>;
  get(path: string): Promise<Buffer | undefined>;
  /** Reads a file as stored, synchronously (to look at the repository in the middle of a command). */
  peek(path: string): string;
  close(): Promise<void>;
}

async function localBackend(root: string): Promise<Backend> {
  const repo = join(root, 'repo');
  await mkdir(repo);
  return {
    name: 'local folder',
    location: repo,
    put: async (path, body) => {
      await mkdir(join(repo, path, '..'), { recursive: true });
      await writeFile(join(repo, path), body);
    },
    get: (path) => readFile(join(repo, path)).catch(() => undefined),
    peek: (path) => readFileSync(join(repo, path), 'utf8'),
    close: async () => undefined,
  };
}

async function s3Backend(root: string): Promise<Backend> {
  const directory = join(root, 's3');
  await mkdir(directory);
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: 'models' }] });
  const { port } = (await server.run()) as { port: number };
  // The CLI takes credentials from the SDK's default chain, here the environment.
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  process.env.AWS_REGION = 'us-east-1';
  const location = `s3://127.0.0.1:${port}/models/prod`;
  const client: S3Client = createS3Client(parseRepositoryLocation(location) as S3RepositoryLocation);
  return {
    name: 's3rver',
    location,
    put: async (path, body) => void (await client.send(new PutObjectCommand({ Bucket: 'models', Key: `prod/${path}`, Body: body }))),
    get: async (path) => {
      try {
        const res = await client.send(new GetObjectCommand({ Bucket: 'models', Key: `prod/${path}` }));
        return Buffer.from(await res.Body!.transformToByteArray());
      } catch {
        return undefined;
      }
    },
    // s3rver keeps each object as a file '<bucket>/<key>._S3rver_object'.
    peek: (path) => readFileSync(join(directory, 'models', 'prod', `${path}._S3rver_object`), 'utf8'),
    close: () => server.close(),
  };
}

describe.each([
  ['local folder', localBackend],
  ['s3rver', s3Backend],
])('batchwise models promote | rollback | list against a %s', (_name, makeBackend) => {
  let root: string;
  let backend: Backend;
  let repoArgs: string[];
  const good = Buffer.from(serializeModel(identity('FP32', [4])));
  const files: Record<string, string> = {};

  const listing = async () => {
    const store = openRepositoryStore(backend.location, { logger: pino({ level: 'silent' }) });
    const snapshot = await store.source.list();
    return snapshot.models.find((m) => m.name === 'ident')!;
  };

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'batchwise-promote-'));
    backend = await makeBackend(root);
    repoArgs = ['--model-repository', backend.location];
    await backend.put('ident/config.pbtxt', CONFIG);
    await backend.put('ident/1/model.onnx', good);
    const write = async (name: string, bytes: Uint8Array) => {
      files[name] = join(root, name);
      await writeFile(files[name]!, bytes);
    };
    await write('good.onnx', good);
    await write('good-v3.onnx', serializeModel(identity('FP32', [4], { inputName: 'INPUT0', outputName: 'OUTPUT0' })));
    await write('truncated.onnx', good.subarray(0, Math.floor(good.length / 2)));
    await write('renamed.onnx', serializeModel(identity('FP32', [4], { inputName: 'X', outputName: 'Y' })));
    await write('wrong-dims.onnx', serializeModel(identity('FP32', [5])));
    await write('wrong-type.onnx', serializeModel(identity('INT32', [4])));
  });
  afterAll(async () => {
    await backend?.close();
    await rm(root, { recursive: true, force: true });
  });

  it.each([
    ['truncated.onnx', /is not a loadable ONNX model \(truncated or corrupt\?\)/],
    [
      'renamed.onnx',
      /does not match the config of 'ident': .*input 'INPUT0' in the config is not an input of the model \(model inputs: 'X'\)/,
    ],
    ['wrong-dims.onnx', /does not match the config of 'ident'/],
    ['wrong-type.onnx', /does not match the config of 'ident'/],
  ])('refuses %s and uploads nothing', async (file, message) => {
    const before = await listing();
    await expect(cli(['promote', ...repoArgs, '--model', 'ident', '--file', files[file]!])).rejects.toThrow(message);
    const after = await listing();
    expect(after.fingerprint).toBe(before.fingerprint);
    expect(after.versions.map((v) => v.version)).toEqual([1]);
    expect((await backend.get('ident/config.pbtxt'))!.toString()).toBe(CONFIG);
  });

  it('promotes: pins version 1 (the default policy would serve 2 on sight), uploads version 2 whole, then points the config at it, with history', async () => {
    let policyDuringUpload: unknown;
    const { out, logs } = await cli(
      ['promote', ...repoArgs, '--model', 'ident', '--file', files['good.onnx']!, '--actor', 'alice', '--message', 'retrained'],
      (line) => {
        if (line.msg === 'uploading model version' && policyDuringUpload === undefined) {
          policyDuringUpload = parseModelConfig(backend.peek('ident/config.pbtxt')).version_policy;
        }
      },
    );
    expect(policyDuringUpload).toEqual({ specific: { versions: [1] } });
    expect(out).toBe("promoted 'ident': now serving version 2 (was 1)\n");
    expect((await backend.get('ident/2/model.onnx'))!.equals(good)).toBe(true);
    const text = (await backend.get('ident/config.pbtxt'))!.toString();
    // A stock protobuf text-format reader (ours) sees a plain config serving version 2.
    const config = parseModelConfig(text);
    expect(config.version_policy).toEqual({ specific: { versions: [2] } });
    expect(config.input[0]!.name).toBe('INPUT0');
    expect(config.dynamic_batching).toEqual({});
    expect(text.split('\n')[0]).toMatch(
      /^# batchwise-promotion: \{"action":"promote","version":2,"from":1,.*"actor":"alice","message":"retrained"/,
    );
    expect(text).toContain(`"sha256":"${createHash('sha256').update(good).digest('hex')}"`);
    // Upload progress and the order of the steps are in the logs.
    const upload = logs.filter((l) => l.msg === 'uploading model version');
    expect(upload.at(-1)).toMatchObject({ phase: 'done', bytesDone: good.length, bytesTotal: good.length, version: 2 });
    const steps = logs.map((l) => l.msg);
    expect(steps.indexOf('artifact is valid')).toBeLessThan(steps.indexOf('uploading model version'));
    expect(steps.findIndex((m) => m.includes('switching the serving version'))).toBeLessThan(
      steps.findIndex((m) => m.includes('now serves version 2')),
    );
  });

  it('promotes again, rolls back step by step, and list shows it all', async () => {
    await cli(['promote', ...repoArgs, '--model', 'ident', '--file', files['good-v3.onnx']!, '--actor', 'bob']);
    expect((await listing()).versions.map((v) => v.version)).toEqual([1, 2, 3]);

    const r1 = await cli(['rollback', ...repoArgs, '--model', 'ident', '--actor', 'carol', '--message', 'latency regression']);
    expect(r1.out).toBe("rolled back 'ident': now serving version 2 (was 3)\n");
    const r2 = await cli(['rollback', ...repoArgs, '--model', 'ident', '--json']);
    expect(JSON.parse(r2.out)).toMatchObject({ model: 'ident', version: 1, from: 2, record: { action: 'rollback' } });
    await expect(cli(['rollback', ...repoArgs, '--model', 'ident'])).rejects.toThrow(
      /no earlier version of 'ident' to roll back to from version 1/,
    );
    // --to goes anywhere present; absent versions are refused.
    await expect(cli(['rollback', ...repoArgs, '--model', 'ident', '--to', '9'])).rejects.toThrow(/version 9: it is no longer in/);
    await cli(['rollback', ...repoArgs, '--model', 'ident', '--to', '3']);

    const json = await cli(['list', ...repoArgs, '--model', 'ident', '--json']);
    const [status] = JSON.parse(json.out) as ModelStatus[];
    expect(status).toMatchObject({ model: 'ident', versions: [1, 2, 3], serving: [3], policy: 'specific [3]' });
    expect(status!.history.map((r) => [r.action, r.version, r.from, r.actor])).toEqual([
      ['promote', 2, 1, 'alice'],
      ['promote', 3, 2, 'bob'],
      ['rollback', 2, 3, 'carol'],
      ['rollback', 1, 2, expect.any(String)],
      ['rollback', 3, 1, expect.any(String)],
    ]);
    const table = (await cli(['list', ...repoArgs])).out;
    expect(table).toMatch(/^MODEL\s+VERSIONS\s+SERVING\s+POLICY\nident\s+1,2,3\s+3\s+specific \[3\]\n/);
    expect(table).toContain('history of ident:');
    expect(table).toMatch(/rollback\s+2\s+3\s+carol\s+latency regression/);
  });

  it('creates a model the repository does not have from --config: version 1, then the config serving it (issue 35)', async () => {
    const configFile = join(root, 'new.config.pbtxt');
    await writeFile(configFile, CONFIG.replace('"ident"', '"fresh"'));
    const { out, logs } = await cli(['promote', ...repoArgs, '--model', 'fresh', '--file', files['good.onnx']!, '--config', configFile]);
    expect(out).toBe("promoted 'fresh': now serving version 1 (was none)\n");
    expect((await backend.get('fresh/1/model.onnx'))!.equals(good)).toBe(true);
    const written = (await backend.get('fresh/config.pbtxt'))!.toString();
    expect(parseModelConfig(written)).toMatchObject({ name: 'fresh', max_batch_size: 8, version_policy: { specific: { versions: [1] } } });
    expect(written.split('\n')[0]).toMatch(/^# batchwise-promotion: \{"action":"promote","version":1,"from":null,/);
    const steps = logs.map((l) => l.msg);
    expect(steps.indexOf('artifact is valid')).toBeLessThan(steps.indexOf('version uploaded; writing the config that serves it'));
    // A config that names another model is refused before anything is written.
    await writeFile(configFile, CONFIG);
    await expect(cli(['promote', ...repoArgs, '--model', 'other', '--file', files['good.onnx']!, '--config', configFile])).rejects.toThrow(
      /the new config names the model 'ident', not 'other'/,
    );
    expect(await backend.get('other/config.pbtxt')).toBeUndefined();
    expect(await backend.get('other/1/model.onnx')).toBeUndefined();
  });

  it('waits for the server to report the new version, sending the API key', async () => {
    let served = ['3'];
    const seenKeys: (string | undefined)[] = [];
    const server: Server = createServer((req, res) => {
      seenKeys.push(req.headers['batchwise-key'] as string | undefined);
      if (req.headers['batchwise-key'] !== 'sekret') {
        res.writeHead(401).end('{"error":"unauthorized"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name: 'ident', versions: served }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      // The server picks the new version up a little later, the old one drains after.
      setTimeout(() => (served = ['3', '4']), 1500);
      setTimeout(() => (served = ['4']), 2500);
      const { out, logs } = await cli([
        'promote',
        ...repoArgs,
        '--model',
        'ident',
        '--file',
        files['good.onnx']!,
        '--server-url',
        url,
        '--wait',
        '--wait-interval-secs',
        '1',
        '--api-key',
        'sekret',
      ]);
      expect(out).toContain('now serving version 4');
      expect(logs.some((l) => l.msg === "server serves version 4 of 'ident'")).toBe(true);
      expect(seenKeys.every((k) => k === 'sekret')).toBe(true);
      // Without the key the wait fails fast and says what is missing.
      await expect(
        cli(['rollback', ...repoArgs, '--model', 'ident', '--server-url', url, '--wait', '--wait-interval-secs', '1']),
      ).rejects.toThrow(/refused the request .*--api-key/);
    } finally {
      server.close();
    }
  }, 30_000);
});
