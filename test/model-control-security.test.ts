/**
 * Issue 29: the model-control API is no way in. On real servers: code never arrives over the API
 * without --allow-code-overrides (403 / PERMISSION_DENIED, nothing run or written), every path a
 * config names stays inside the model's folder (nothing outside read), errors name models and
 * model-relative paths only, a path the file system refuses fails in Triton's words, and other
 * models serve throughout. A server whose model-control API others can reach without a key says
 * so, and doctor reports it; S3 keys never land outside the local cache (s3rver).
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, GrpcStatus } from '@batchwise/client';
import { identity, serializeModel } from '@batchwise/modelgen';
import { runDoctor } from '../packages/server/src/cli/doctor.ts';
import { defaultCacheDir } from '../packages/server/src/repository/create-model-source.ts';
import { EXAMPLES, identityConfig as config, makeRepository } from './support/repository.ts';
import { S3_BUCKET, startTestS3, useS3rverCredentials, type TestS3 } from './support/s3.ts';
import { postJson, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const IDENTITY = serializeModel(identity('FP32', [4]));
/** The same model as a load request's config override (protobuf JSON). */
const overrideOf = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    max_batch_size: 8,
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4] }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4] }],
    ...extra,
  });
const JS_CONFIG = JSON.stringify({
  backend: 'js',
  max_batch_size: 0,
  input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [1] }],
  output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [1] }],
});
/** A JavaScript model whose module, once imported, writes `marker`: proof that code sent over the API ran. */
const writingModule = (marker: string) => `
import { writeFileSync } from 'node:fs';
import { tensor } from '@batchwise/backend';
writeFileSync(${JSON.stringify(marker)}, 'code sent over the model-control API ran');
export default { execute: (requests) => requests.map((r) => ({ outputs: [tensor('Y', 'FP32', r.inputs.X.shape, r.inputs.X.data)] })) };
`;
const base64 = (text: string | Uint8Array) => Buffer.from(text).toString('base64');

const load = async (server: Server, model: string, parameters: Record<string, unknown>) => {
  const { status, json } = await postJson(`${server.url}/v2/repository/models/${model}/load`, { parameters });
  return { status, message: (json?.error ?? '') as string };
};
const grpcCall = (grpc: GrpcClient, promise: Promise<unknown>) =>
  promise.then(
    () => ({ code: 0, message: '' }),
    (error: BatchwiseClientError) => ({ code: error.grpcCode, message: error.message }),
  );
const index = async (server: Server) => (await postJson(`${server.url}/v2/repository/index`, {})).json as any[];
const overrideFolders = async () => (await readdir(tmpdir())).filter((n) => n.startsWith('batchwise-override-')).sort();

/** Infers on `model` until stopped; every answer must be 200 (the server serves throughout). */
function keepServing(server: Server, model: string): { stop(): Promise<number[]> } {
  const statuses: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const { status } = await postJson(`${server.url}/v2/models/${model}/infer`, {
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
      });
      statuses.push(status);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return statuses;
    },
  };
}

describe('the model-control API of a server without --allow-code-overrides', () => {
  let scratch: string;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: Server;
  let grpc: GrpcClient;
  let traffic: ReturnType<typeof keepServing>;
  /** Every error the probes got over the API, to check that none names a server path. */
  const answers: string[] = [];

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'batchwise-security-'));
    repo = await makeRepository([
      { name: 'a', model: identity('FP32', [4]), config: config('a') },
      // An ONNX model whose version folder also holds a module: code only once a config makes the model js.
      {
        name: 'plain',
        model: identity('FP32', [4]),
        config: config('plain'),
        files: { '1/model.mjs': writingModule(join(scratch, 'switched')) },
      },
      {
        name: 'shout',
        config: `name: "shout"\nbackend: "js"\nmax_batch_size: 0\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]`,
        files: { '1/model.mjs': writingModule(join(scratch, 'repository-code')) },
      },
      // A model file that is a link out of the model's folder, to a model ONNX Runtime would load.
      { name: 'linked', config: config('linked') },
      {
        name: 'unlabelled',
        model: identity('FP32', [4]),
        config: config('unlabelled').replace(
          'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }',
          'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" }',
        ),
      },
      { name: 'garbled', model: identity('FP32', [4]), config: 'name: "garbled"\nmax_batch_size: eight\n' },
    ]);
    // Bait: a valid model outside every model folder. Were it opened, a load naming it would succeed.
    await mkdir(join(repo.dir, '.bait'));
    await writeFile(join(repo.dir, '.bait', 'model.onnx'), IDENTITY);
    await mkdir(join(repo.dir, 'linked', '1'), { recursive: true });
    await symlink(join(repo.dir, '.bait', 'model.onnx'), join(repo.dir, 'linked', '1', 'model.onnx'));
    server = await startTestServer([repo.dir], { modelControlMode: 'explicit', loadModels: ['a'] });
    grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    traffic = keepServing(server, 'a');
  });
  afterAll(async () => {
    const statuses = await traffic.stop();
    await grpc.close();
    await server.close();
    await repo.remove();
    await rm(scratch, { recursive: true, force: true });
    // Served throughout, every probe included.
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  });

  it("fails a file override the file system refuses in Triton's words, without our temporary folder, and stays ready", async () => {
    // Triton's qa/L0_http test_load_oversized_file_parameter: one path component longer than NAME_MAX.
    const oversized = await load(server, 'onnx_zero_1_float32', { ['file:' + 'A'.repeat(256)]: 'YQ==', config: '{}' });
    expect(oversized.status).toBe(500);
    expect(oversized.message).toContain("failed to load 'onnx_zero_1_float32', failed to poll from model repository");
    expect(oversized.message).toContain('(ENAMETOOLONG)');
    expect(oversized.message).not.toContain('batchwise-override');
    expect((await fetch(`${server.url}/v2/health/ready`)).status).toBe(200);
    answers.push(oversized.message);
  });

  it('refuses a JavaScript model sent as files with 403 naming the flag, over HTTP and gRPC; the module never runs', async () => {
    const marker = join(scratch, 'sent');
    const before = await overrideFolders();
    // The request: a config override to backend js and a file:1/model.mjs whose module writes a file.
    const http = await load(server, 'x', { config: JS_CONFIG, 'file:1/model.mjs': base64(writingModule(marker)) });
    expect(http).toEqual({
      status: 403,
      message:
        'failed to load \'x\': its file overrides would be the code of a backend "js" model; ' +
        'code is accepted over the model-control API only by a server started with --allow-code-overrides',
    });
    const rpc = await grpcCall(
      grpc,
      grpc.loadModel('x', { config: JS_CONFIG, files: { '1/model.mjs': Buffer.from(writingModule(marker)) } }),
    );
    expect(rpc.code).toBe(GrpcStatus.PERMISSION_DENIED);
    expect(rpc.message).toContain('--allow-code-overrides');
    // Nothing ran, nothing was written: not the module's file, not even a folder for the overrides.
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(marker)).toBe(false);
    expect(await overrideFolders()).toEqual(before);
    expect((await fetch(`${server.url}/v2/models/x/ready`)).status).toBe(400);
    answers.push(http.message, rpc.message);
  });

  it('refuses node_modules among file overrides and a config that switches a model to js; a js model of the repository keeps its config overrides', async () => {
    const packaged = await load(server, 'y', {
      config: overrideOf(),
      'file:1/model.onnx': base64(IDENTITY),
      'file:1/node_modules/left-pad/index.js': base64('module.exports = 1;'),
    });
    expect(packaged.status).toBe(403);
    expect(packaged.message).toContain("'file:1/node_modules/left-pad/index.js' is in a node_modules folder");

    // plain is an ONNX model; as js its version folder's model.mjs would run.
    const switched = await load(server, 'plain', { config: JS_CONFIG });
    expect(switched.status).toBe(403);
    expect(switched.message).toContain('would switch the model to backend "js"');
    expect(existsSync(join(scratch, 'switched'))).toBe(false);
    expect((await fetch(`${server.url}/v2/models/plain/ready`)).status).toBe(400);

    // shout is js in the repository: its code is the operator's, and a config override changes no code.
    expect(await load(server, 'shout', { config: JS_CONFIG })).toEqual({ status: 200, message: '' });
    expect(existsSync(join(scratch, 'repository-code'))).toBe(true);
    answers.push(packaged.message, switched.message);
  });

  it('ONNX files still arrive through file overrides, as Triton users send them', async () => {
    expect(await load(server, 'fresh', { config: overrideOf(), 'file:1/model.onnx': base64(IDENTITY) })).toEqual({
      status: 200,
      message: '',
    });
    expect((await fetch(`${server.url}/v2/models/fresh/ready`)).status).toBe(200);
  });

  it("refuses a default_model_filename that leaves the model's folder, naming the field and the path as given; ONNX Runtime never opens it", async () => {
    // The request.
    const passwd = await load(server, 'a', { config: overrideOf({ default_model_filename: '../../../../../../../etc/passwd' }) });
    expect(passwd).toEqual({
      status: 400,
      message:
        "failed to load 'a': model 'a': default_model_filename '../../../../../../../etc/passwd' must name a file inside the model's folder",
    });
    // The bait is a valid model: had ONNX Runtime opened it, these loads would have succeeded.
    for (const path of [`../../.bait/model.onnx`, join(repo.dir, '.bait', 'model.onnx')]) {
      const bait = await load(server, 'a', { config: overrideOf({ default_model_filename: path }) });
      expect(bait.status, path).toBe(400);
      expect(bait.message, path).toContain(`default_model_filename '${path}' must name a file inside the model's folder`);
    }
    // From the repository too: a model file that links out of its folder.
    const linked = await load(server, 'linked', {});
    expect(linked.status).toBe(400);
    expect(linked.message).toContain(
      "model 'linked': default_model_filename 'model.onnx' must name a file inside the model's folder: a symbolic link on its way leads out of it",
    );
    // A is still served by its repository version (the traffic loop checks every answer).
    expect((await fetch(`${server.url}/v2/models/a/ready`)).status).toBe(200);
    answers.push(passwd.message, linked.message);
  });

  it('checks every path a config names, from a load request with files as from the repository', async () => {
    const escapes: [string, Record<string, unknown>][] = [
      [
        "label_filename of output 'OUTPUT0'",
        { output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4], label_filename: '../../../etc/hosts' }] },
      ],
      ["cc_model_filenames['7.5']", { cc_model_filenames: { '7.5': '../../../etc/hosts' } }],
      [
        "input_data_file of warmup sample 'w' input 'INPUT0'",
        { model_warmup: [{ name: 'w', inputs: { INPUT0: { data_type: 'TYPE_FP32', dims: [4], input_data_file: '../../../etc/hosts' } } }] },
      ],
      [
        "data_file of initial_state 's'",
        {
          sequence_batching: {
            state: [
              {
                input_name: 'I',
                output_name: 'O',
                data_type: 'TYPE_FP32',
                dims: [1],
                initial_state: [{ name: 's', data_type: 'TYPE_FP32', dims: [1], data_file: '../../../etc/hosts' }],
              },
            ],
          },
        },
      ],
    ];
    for (const [field, extra] of escapes) {
      const refused = await load(server, 'z', { config: overrideOf(extra), 'file:1/model.onnx': base64(IDENTITY) });
      expect(refused, field).toEqual({
        status: 400,
        message: `failed to load 'z': model 'z': ${field} '../../../etc/hosts' must name a file inside the model's folder`,
      });
      answers.push(refused.message);
    }
  });

  it("refuses a model name that is a path, as Triton does, or that starts with '.'", async () => {
    const rpc = await grpcCall(grpc, grpc.loadModel('../escape', { config: overrideOf(), files: { '1/model.onnx': IDENTITY } }));
    expect(rpc).toEqual({
      code: GrpcStatus.INVALID_ARGUMENT,
      message: "invalid model name '../escape', model name must not contain path traversal characters",
    });
    answers.push(rpc.message);
    // '.' and names starting with it are no folder of a repository, and no model to load (a URL cannot
    // carry '.' alone: the WHATWG URL parser drops the segment, so it goes over gRPC only).
    const message = (name: string) => `invalid model name '${name}', model name must not start with '.' (such folders are not models)`;
    const files = { config: overrideOf(), 'file:1/model.onnx': base64(IDENTITY) };
    expect(await load(server, '.hidden', files)).toEqual({ status: 400, message: message('.hidden') });
    for (const name of ['.', '.hidden']) {
      expect(await grpcCall(grpc, grpc.loadModel(name, { config: overrideOf(), files: { '1/model.onnx': IDENTITY } }))).toEqual({
        code: GrpcStatus.INVALID_ARGUMENT,
        message: message(name),
      });
    }
  });

  it('names models and model-relative paths only, in every answer and in the repository index', async () => {
    const failures = [
      // ONNX Runtime's own words name the file it was given.
      await load(server, 'broken', { config: overrideOf(), 'file:1/model.onnx': base64('not an onnx model') }),
      await load(server, 'broken', { config: overrideOf(), 'file:1/weights.bin': base64(IDENTITY) }),
      await load(server, 'unlabelled', {}),
      await load(server, 'garbled', {}),
    ];
    expect(failures.map((f) => f.status)).toEqual([400, 400, 400, 400]);
    expect(failures[0]!.message).toMatch(/^failed to load 'broken': .*broken\/1\/model\.onnx/);
    expect(failures[1]!.message).toBe("failed to load 'broken': model 'broken' version 1: model file 1/model.onnx not found");
    expect(failures[2]!.message).toBe(
      "failed to load 'unlabelled': model 'unlabelled': label_filename of output 'OUTPUT0': cannot read 'labels.txt': no such file or directory (ENOENT)",
    );
    expect(failures[3]!.message).toMatch(/^failed to load 'garbled': garbled\/config\.pbtxt:2:/);
    answers.push(...failures.map((f) => f.message));
    const reasons = (await index(server)).map((entry) => entry.reason ?? '');
    for (const text of [...answers, ...reasons]) {
      expect(text).not.toContain(tmpdir());
      expect(text).not.toContain(repo.dir);
      expect(text).not.toMatch(/batchwise-(override|repo)-|file:\/\//);
    }
  });
});

describe('a server started with --allow-code-overrides', () => {
  it("runs the JavaScript model sent as files (the refused request's proof), naming no temporary folder when its code fails", async () => {
    const scratch = await mkdtemp(join(tmpdir(), 'batchwise-security-'));
    const repo = await makeRepository([]);
    const server = await startTestServer([repo.dir], { modelControlMode: 'explicit', allowCodeOverrides: true });
    try {
      const marker = join(scratch, 'sent');
      expect(await load(server, 'x', { config: JS_CONFIG, 'file:1/model.mjs': base64(writingModule(marker)) })).toEqual({
        status: 200,
        message: '',
      });
      expect(existsSync(marker)).toBe(true);
      const broken = await load(server, 'y', { config: JS_CONFIG, 'file:1/model.mjs': base64('export default {{ not javascript') });
      expect(broken.status).toBe(400);
      expect(broken.message).toMatch(/^failed to load 'y': model 'y' \(backend js\): cannot import y\/1\/model\.mjs: /);
      expect(broken.message).not.toContain(tmpdir());
      expect(broken.message).not.toMatch(/batchwise-override-|file:\/\//);
    } finally {
      await server.close();
      await repo.remove();
      await rm(scratch, { recursive: true, force: true });
    }
  });
});

describe('a server whose model-control API others can reach', () => {
  /** A server's warnings, as JSON lines of its logger. */
  async function startLogged(options: Parameters<typeof startTestServer>[1]) {
    const lines: { level: number; msg: string }[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const server = await startTestServer([EXAMPLES], { modelControlMode: 'explicit', logger, ...options });
    const doctor = () =>
      runDoctor({ expectGpu: false, amiFamily: 'al2023', json: false, serverMetrics: `http://127.0.0.1:${server.metricsPort}/metrics` });
    return { server, warnings: () => lines.filter((l) => l.level === 40).map((l) => l.msg), doctor };
  }

  it('warns at start-up without a key on a non-loopback address, saying what that exposes, and doctor reports it', async () => {
    const { server, warnings, doctor } = await startLogged({ host: '0.0.0.0' });
    try {
      const warning = warnings().find((w) => w.startsWith('the model-control API answers without a key'));
      expect(warning).toBe(
        `the model-control API answers without a key on http 0.0.0.0:${server.httpPort} and grpc 0.0.0.0:${server.grpcPort}: ` +
          'anyone who reaches it can unload every model and load others, with configs and ONNX files of their own that ONNX Runtime ' +
          'parses in this process; give it a key (BATCHWISE_MODEL_REPOSITORY_KEY, or model-repository in --http-restricted-api and ' +
          '--grpc-restricted-protocol) or listen on 127.0.0.1 (--http-address, --grpc-address)',
      );
      const check = (await doctor()).find((c) => c.name === 'model-control-api');
      expect(check).toMatchObject({ ok: false, required: false });
      expect(check!.detail).toContain(`answers without a key on http 0.0.0.0:${server.httpPort} and grpc 0.0.0.0:${server.grpcPort}`);
    } finally {
      await server.close();
    }
  });

  it('says nothing with a key, or on loopback; doctor finds the API closed', async () => {
    const keyed = await startLogged({
      host: '0.0.0.0',
      httpRestrictedApi: ['model-repository:batchwise-key=secret'],
      grpcRestrictedProtocol: ['model-repository:batchwise-key=secret'],
    });
    const loopback = await startLogged({ allowCodeOverrides: true });
    try {
      for (const { warnings, doctor } of [keyed, loopback]) {
        expect(warnings().filter((w) => w.includes('model-control API'))).toEqual([]);
        expect((await doctor()).find((c) => c.name === 'model-control-api')).toMatchObject({ ok: true });
      }
    } finally {
      await keyed.server.close();
      await loopback.server.close();
    }
  });
});

/**
 * An S3 endpoint in front of s3rver for keys that S3 holds and s3rver's file store cannot: a
 * segment stored as DOTDOT is listed (and fetched) as '..', one stored as EMPTY as '' (`p//tmp/x`).
 * The server under test talks S3 to it as to any S3.
 */
async function startHostileKeysProxy(s3: TestS3): Promise<{ port: number; close(): Promise<void> }> {
  const stored = (key: string) => key.replace(/(^|\/)\.\.(?=\/)/g, '$1DOTDOT').replace(/\/\//g, '/EMPTY/');
  const listed = (text: string) => text.replace(/DOTDOT/g, '..').replace(/\/EMPTY\//g, '//');
  const proxy = createServer((req, res) => {
    const [path = '', query = ''] = (req.url ?? '').split('?');
    const key = decodeURIComponent(path).replace(`/${S3_BUCKET}/`, '');
    if (req.method === 'GET' && stored(key) !== key) {
      // A hostile key asked for by name: served from where s3rver keeps it.
      void s3.client.send(new GetObjectCommand({ Bucket: S3_BUCKET, Key: stored(key) })).then(async (object) => {
        const body = Buffer.from(await object.Body!.transformToByteArray());
        res.writeHead(200, { etag: object.ETag!, 'content-length': body.length, 'content-type': 'application/octet-stream' }).end(body);
      });
      return;
    }
    const upstream = request({ host: '127.0.0.1', port: s3.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (c: Buffer) => chunks.push(c));
      answer.on('end', () => {
        const text = Buffer.concat(chunks);
        const body = query.includes('list-type') ? Buffer.from(listed(text.toString('utf8'))) : text;
        const headers = { ...answer.headers, 'content-length': String(body.length) };
        delete headers['transfer-encoding'];
        res.writeHead(answer.statusCode ?? 502, headers).end(body);
      });
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    port: (proxy.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => proxy.close(() => resolve())),
  };
}

describe('an S3 repository whose keys leave their folder (s3rver)', () => {
  it('never writes outside the local cache: the model with such a key fails naming it, the others serve', async () => {
    useS3rverCredentials();
    const dir = await mkdtemp(join(tmpdir(), 'batchwise-s3keys-'));
    const s3 = await startTestS3(join(dir, 's3'));
    const proxy = await startHostileKeysProxy(s3);
    const location = `s3://127.0.0.1:${proxy.port}/${S3_BUCKET}/prod`;
    const cacheRoot = join(tmpdir(), 'batchwise-cache');
    const tag = Math.random().toString(36).slice(2);
    const hostile = {
      m: `1/../../../escape-${tag}.txt`, // a version file, three levels up from its staging folder
      n: `../../escape-${tag}.txt`, // a model-level file, two levels up from the model's cache folder
      p: `/tmp/absolute-${tag}.txt`, // an absolute path after the model's name
    };
    for (const name of ['ok', ...Object.keys(hostile)]) {
      await s3.put(`prod/${name}/config.pbtxt`, config(name));
      await s3.put(`prod/${name}/1/model.onnx`, IDENTITY);
    }
    for (const [name, path] of Object.entries(hostile)) {
      await s3.put(`prod/${name}/${path.replace(/(^|\/)\.\.(?=\/)/g, '$1DOTDOT').replace(/^\//, 'EMPTY/')}`, 'escaped');
    }
    const server = await startTestServer([location]);
    try {
      const entries = await index(server);
      expect(entries.find((e) => e.name === 'ok')).toMatchObject({ state: 'READY' });
      const infer = await postJson(`${server.url}/v2/models/ok/infer`, {
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
      });
      expect(infer.status).toBe(200);
      for (const [name, path] of Object.entries(hostile)) {
        expect(
          entries.find((e) => e.name === name),
          name,
        ).toMatchObject({
          state: 'UNAVAILABLE',
          reason: `model '${name}': the object '${path}' of its folder is not a plain path (an empty, '.' or '..' segment), so it is not downloaded: rename it in the repository`,
        });
      }
      // Where the keys lead: beside the repository's cache folder, and /tmp.
      for (const folder of [cacheRoot, '/tmp'])
        expect(
          (await readdir(folder)).filter((f) => f.includes(tag)),
          folder,
        ).toEqual([]);
    } finally {
      await server.close();
      await proxy.close();
      await s3.close();
      await rm(defaultCacheDir(location), { recursive: true, force: true });
      await rm(dir, { recursive: true, force: true });
    }
  });
});
