import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { pino, type Logger } from 'pino';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withBackoff } from '../packages/server/src/repository/backoff.ts';
import { createModelSource } from '../packages/server/src/repository/create-model-source.ts';
import { RepositoryError } from '../packages/server/src/repository/repository-error.ts';
import { parseRepositoryLocation, type S3RepositoryLocation } from '../packages/server/src/repository/repository-url.ts';
import { createS3Client } from '../packages/server/src/repository/s3-client.ts';
import { S3ModelSource } from '../packages/server/src/repository/s3-model-source.ts';

const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
const BUCKET = 'models';

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}
function captureLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) });
  return { logger, lines };
}

async function startS3rver(directory: string, port = 0): Promise<{ server: S3rver; port: number }> {
  const server = new S3rver({ address: '127.0.0.1', port, silent: true, directory, configureBuckets: [{ name: BUCKET }] });
  const address = (await server.run()) as { port: number };
  return { server, port: address.port };
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as { port: number };
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/** Counts the S3 operations a client sends, by command name. */
function countCommands(client: S3Client): Map<string, number> {
  const counts = new Map<string, number>();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      counts.set(context.commandName!, (counts.get(context.commandName!) ?? 0) + 1);
      return next(args);
    },
    { step: 'initialize', name: 'countCommands' },
  );
  return counts;
}

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');
const bytesOf = (seed: number, n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) % 251));

describe('S3ModelSource against s3rver', () => {
  let dir: string;
  let s3dir: string;
  let server: S3rver;
  let location: S3RepositoryLocation;
  let client: S3Client;
  let put: (key: string, body: Buffer | string) => Promise<void>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-s3-'));
    s3dir = join(dir, 's3');
    await import('node:fs/promises').then((fs) => fs.mkdir(s3dir));
    const started = await startS3rver(s3dir);
    server = started.server;
    location = parseRepositoryLocation(`s3://127.0.0.1:${started.port}/${BUCKET}/prod`) as S3RepositoryLocation;
    client = createS3Client(location, { credentials: CREDENTIALS });
    put = async (key, body) => {
      await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `prod/${key}`, Body: body }));
    };
    await put('alpha/config.pbtxt', 'name: "alpha"\n');
    await put('alpha/1/model.onnx', bytesOf(1, 5000));
    await put('alpha/2/model.onnx', bytesOf(2, 7000));
    await put('beta/config.pbtxt', 'name: "beta"\n');
    await put('beta/1/model.onnx', bytesOf(3, 3000));
    await put('beta/1/weights.bin', bytesOf(4, 200_000));
    await put('beta/labels.txt', 'cat\ndog\n');
    await put('.hidden/1/model.onnx', 'x');
    await put('README.md', 'not a model');
    // Outside the prefix: never listed.
    await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'staging/gamma/1/model.onnx', Body: 'x' }));
  });
  afterAll(async () => {
    await server?.close();
    await rm(dir, { recursive: true, force: true });
  });

  function repository(options: { cacheDir?: string; listPageSize?: number; downloadAttempts?: number } = {}) {
    const { logger, lines } = captureLogger();
    const repoClient = createS3Client(location, { credentials: CREDENTIALS });
    const counts = countCommands(repoClient);
    const repo = new S3ModelSource(location, { logger, cacheDir: join(dir, 'unused'), client: repoClient, ...options });
    return { repo, counts, lines };
  }

  it('lists models, versions, sizes and ETags in one ListObjectsV2 pass', async () => {
    const { repo, counts } = repository();
    const snapshot = await repo.list();
    expect(counts.get('ListObjectsV2Command')).toBe(1);
    expect(snapshot.requests).toBe(1);
    expect(snapshot.models.map((m) => m.name)).toEqual(['alpha', 'beta']);
    const alpha = snapshot.models[0]!;
    expect(alpha.config).toMatchObject({ path: 'config.pbtxt', key: 'prod/alpha/config.pbtxt', etag: md5('name: "alpha"\n') });
    expect(alpha.versions.map((v) => v.version)).toEqual([1, 2]);
    expect(alpha.versions[1]!.files).toEqual([
      { path: '2/model.onnx', key: 'prod/alpha/2/model.onnx', size: 7000, etag: md5(bytesOf(2, 7000)) },
    ]);
    const beta = snapshot.models[1]!;
    expect(beta.versions[0]!.files.map((f) => f.path)).toEqual(['1/model.onnx', '1/weights.bin']);
    expect(beta.versions[0]!.totalBytes).toBe(203_000);
    expect(beta.otherFiles.map((f) => f.path)).toEqual(['labels.txt']);
  });

  it('pages through the listing: still one pass, one request per page', async () => {
    // s3rver makes its continuation tokens with DES, which OpenSSL 3 only has in its legacy
    // provider: run this s3rver in a child process started with it.
    const childDir = join(dir, 's3-child');
    await import('node:fs/promises').then((fs) => fs.mkdir(childDir));
    const s3rverPath = createRequire(import.meta.url).resolve('s3rver');
    const script = `const S3rver = require(${JSON.stringify(s3rverPath)});
      new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: ${JSON.stringify(childDir)},
        configureBuckets: [{ name: 'models' }] }).run().then((a) => console.log(JSON.stringify(a)));`;
    const child = spawn(process.execPath, ['--openssl-legacy-provider', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const [line] = (await once(child.stdout!, 'data')) as [Buffer];
      const port = (JSON.parse(line.toString()) as { port: number }).port;
      const childLocation = parseRepositoryLocation(`s3://127.0.0.1:${port}/${BUCKET}/prod`) as S3RepositoryLocation;
      const childClient = createS3Client(childLocation, { credentials: CREDENTIALS });
      for (const key of ['a/config.pbtxt', 'a/1/model.onnx', 'a/2/model.onnx', 'b/1/model.onnx', 'b/1/x.bin']) {
        await childClient.send(new PutObjectCommand({ Bucket: BUCKET, Key: `prod/${key}`, Body: key }));
      }
      const counts = countCommands(childClient);
      const { logger } = captureLogger();
      const repo = new S3ModelSource(childLocation, { logger, cacheDir: join(dir, 'unused'), client: childClient, listPageSize: 2 });
      const snapshot = await repo.list();
      expect(snapshot.requests).toBe(3);
      expect(counts.get('ListObjectsV2Command')).toBe(3);
      expect(snapshot.models.map((m) => [m.name, m.versions.map((v) => v.version)])).toEqual([
        ['a', [1, 2]],
        ['b', [1]],
      ]);
      expect(snapshot.models[1]!.versions[0]!.files.map((f) => f.path)).toEqual(['1/model.onnx', '1/x.bin']);
    } finally {
      child.kill();
    }
  });

  it('fingerprints change with an object’s content, and only where it changed', async () => {
    const { repo } = repository();
    const before = await repo.list();
    await put('alpha/2/model.onnx', bytesOf(22, 7000)); // same size, other bytes
    const after = await repo.list();
    const [a0, a1] = [before.models[0]!, after.models[0]!];
    expect(a1.versions[1]!.fingerprint).not.toBe(a0.versions[1]!.fingerprint);
    expect(a1.versions[0]!.fingerprint).toBe(a0.versions[0]!.fingerprint);
    expect(a1.configFingerprint).toBe(a0.configFingerprint);
    expect(a1.fingerprint).not.toBe(a0.fingerprint);
    expect(after.models[1]!.fingerprint).toBe(before.models[1]!.fingerprint);

    await put('alpha/config.pbtxt', 'name: "alpha"\nmax_batch_size: 4\n');
    const third = (await repo.list()).models[0]!;
    expect(third.configFingerprint).not.toBe(a1.configFingerprint);
    expect(third.versions[1]!.fingerprint).toBe(a1.versions[1]!.fingerprint);
    // Unchanged repository, unchanged fingerprints.
    expect((await repo.list()).models[0]!.fingerprint).toBe(third.fingerprint);
  });

  it('localizes whole versions with progress logs, skips unchanged files, prunes only when told', async () => {
    const cache = join(dir, 'cache-1');
    const { repo, counts, lines } = repository({ cacheDir: cache });
    const snapshot = await repo.list();
    const beta = snapshot.models.find((m) => m.name === 'beta')!;
    const modelDir = await repo.localize('beta', [1], { listing: beta });
    expect(modelDir).toBe(join(cache, 'beta'));
    expect(await readFile(join(modelDir, 'config.pbtxt'), 'utf8')).toBe('name: "beta"\n');
    expect(await readFile(join(modelDir, 'labels.txt'), 'utf8')).toBe('cat\ndog\n');
    expect((await readFile(join(modelDir, '1', 'weights.bin'))).equals(bytesOf(4, 200_000))).toBe(true);
    expect((await readFile(join(modelDir, '1', 'model.onnx'))).equals(bytesOf(3, 3000))).toBe(true);
    expect(counts.get('GetObjectCommand')).toBe(4);
    const progress = lines.filter((l) => l.msg === 'downloading model from S3' && l.phase !== undefined);
    expect(progress.at(-1)).toMatchObject({ phase: 'done', bytesDone: 203_000 + 13 + 8, bytesTotal: 203_021, model: 'beta' });
    expect(lines.some((l) => l.msg === 'model version complete in the local cache' && l.version === 1)).toBe(true);

    // Nothing changed: nothing downloaded.
    await repo.localize('beta', [1], { listing: beta });
    expect(counts.get('GetObjectCommand')).toBe(4);

    // One file changed: only that file is downloaded again; the others are reused.
    await put('beta/1/model.onnx', bytesOf(33, 3000));
    const changed = (await repo.list()).models.find((m) => m.name === 'beta')!;
    await repo.localize('beta', [1], { listing: changed });
    expect(counts.get('GetObjectCommand')).toBe(5);
    expect((await readFile(join(modelDir, '1', 'model.onnx'))).equals(bytesOf(33, 3000))).toBe(true);
    expect((await readFile(join(modelDir, '1', 'weights.bin'))).equals(bytesOf(4, 200_000))).toBe(true);

    // A damaged cached file (wrong size) is downloaded again, not trusted.
    await truncate(join(modelDir, '1', 'weights.bin'), 100);
    await repo.localize('beta', [1], { listing: changed });
    expect(counts.get('GetObjectCommand')).toBe(6);
    expect((await stat(join(modelDir, '1', 'weights.bin'))).size).toBe(200_000);

    // Without a listing, localize lists the model's own prefix. It never removes a version (a
    // loaded version may read its files again); prune() does, keeping what it is told to keep.
    const alphaDir = await repo.localize('alpha', [1, 2]);
    expect((await readdir(alphaDir)).filter((n) => !n.startsWith('.')).sort()).toEqual(['1', '2', 'config.pbtxt']);
    await repo.localize('alpha', [2]);
    expect((await readdir(alphaDir)).filter((n) => !n.startsWith('.')).sort()).toEqual(['1', '2', 'config.pbtxt']);
    await repo.prune('alpha', [2]);
    expect((await readdir(alphaDir)).filter((n) => !n.startsWith('.')).sort()).toEqual(['2', 'config.pbtxt']);

    await expect(repo.localize('alpha', [7])).rejects.toThrow(/has no version 7/);
    await expect(repo.localize('nope', [1])).rejects.toBeInstanceOf(RepositoryError);
  });

  it('never shows a partial version folder while it downloads', async () => {
    const cache = join(dir, 'cache-watch');
    const { repo } = repository({ cacheDir: cache });
    const versionDir = join(cache, 'beta', '1');
    const seen: number[][] = [];
    let done = false;
    const watcher = (async () => {
      while (!done) {
        if (existsSync(versionDir)) {
          const sizes = await Promise.all(
            ['model.onnx', 'weights.bin'].map((f) =>
              stat(join(versionDir, f)).then(
                (s) => s.size,
                () => -1,
              ),
            ),
          );
          seen.push(sizes);
        }
        await new Promise((r) => setImmediate(r));
      }
    })();
    await repo.localize('beta', [1]);
    done = true;
    await watcher;
    for (const sizes of seen) expect(sizes).toEqual([3000, 200_000]);
  });

  it('refuses bytes that do not match the listed MD5 ETag or size, and leaves no version folder', async () => {
    const cache = join(dir, 'cache-corrupt');
    const { repo, lines } = repository({ cacheDir: cache, downloadAttempts: 2 });
    await put('delta/config.pbtxt', 'name: "delta"\n');
    await put('delta/1/model.onnx', bytesOf(5, 4000));
    await put('delta/1/weights.bin', bytesOf(6, 4000));
    await put('delta/2/model.onnx', bytesOf(7, 4000));
    await repo.localize('delta', [1]);

    // Storage corruption: the object's bytes change on s3rver's disk, same size, while the
    // ETag it serves (its stored MD5) stays the one of the original upload.
    const stored = join(s3dir, BUCKET, 'prod', 'delta', '2', 'model.onnx._S3rver_object');
    expect(existsSync(stored)).toBe(true);
    await writeFile(stored, bytesOf(99, 4000));
    await expect(repo.localize('delta', [1, 2])).rejects.toThrow(/MD5 of the received bytes is .*, the ETag says/);
    // Each file is tried downloadAttempts times through the backoff helper, saying why it waits.
    const retries = lines.filter((l) => l.level === 40 && /delta\/2\/model\.onnx/.test(l.msg));
    expect(retries.map((l) => l.msg)).toEqual([
      expect.stringMatching(/^download failed, retrying in [0-9.]+s \(downloading s3:\/\/models\/prod\/delta\/2\/model\.onnx: .*MD5/),
    ]);
    expect(existsSync(join(cache, 'delta', '2'))).toBe(false);
    // The version already cached stays whole; no staging or temp files are left behind.
    expect((await readFile(join(cache, 'delta', '1', 'weights.bin'))).equals(bytesOf(6, 4000))).toBe(true);
    expect((await readdir(join(cache, 'delta'))).filter((n) => /staging|\.part-/.test(n))).toEqual([]);

    // A truncated object (the listing said 4000 bytes, 1000 arrive): refused, and one good
    // file of the same version does not make the version folder appear.
    await put('delta/3/a.bin', bytesOf(8, 4000));
    await put('delta/3/b.bin', bytesOf(9, 4000));
    const listing = (await repo.list()).models.find((m) => m.name === 'delta')!;
    await truncate(join(s3dir, BUCKET, 'prod', 'delta', '3', 'b.bin._S3rver_object'), 1000);
    await expect(repo.localize('delta', [3], { listing })).rejects.toThrow(/received 1000 bytes, the listing says 4000/);
    expect(existsSync(join(cache, 'delta', '3'))).toBe(false);
  });

  it('reads config.pbtxt alone, or says there is none', async () => {
    const { repo } = repository();
    const alpha = (await repo.list()).models.find((m) => m.name === 'alpha')!;
    expect(await repo.readConfigText('alpha', alpha)).toContain('name: "alpha"');
    expect(await repo.readConfigText('missing')).toBeUndefined();
  });

  it('createModelSource gives the same interface for S3 and a local folder', async () => {
    const { logger } = captureLogger();
    const cache = join(dir, 'cache-factory');
    const s3 = createModelSource(location.url, { logger, cacheDir: cache, s3: { credentials: CREDENTIALS } });
    expect(s3.kind).toBe('s3');
    expect((await s3.list()).models.map((m) => m.name)).toEqual(['alpha', 'beta', 'delta']);
    const alpha = (await s3.listModels()).find((m) => m.name === 'alpha')!;
    // Localizing downloads what the model's policy selects (latest 1 of versions 1 and 2).
    const folder = await alpha.localize();
    expect(folder).toMatchObject({ name: 'alpha', dir: join(cache, 'alpha'), versions: [2] });
    expect(folder.configText).toContain('name: "alpha"');

    const local = createModelSource(cache, { logger });
    expect(local.kind).toBe('local');
    const localSnapshot = await local.list();
    expect(localSnapshot.models.map((m) => [m.name, m.versions.map((v) => v.version)])).toEqual([['alpha', [2]]]);
    const [localAlpha] = await local.listModels();
    expect(await localAlpha!.localize()).toMatchObject({ name: 'alpha', dir: folder.dir, versions: [2] });
    // A local repository is the user's own folder: prune never removes anything from it.
    await localAlpha!.prune([]);
    expect(await readdir(join(cache, 'alpha'))).toContain('2');
  });
});

describe('withBackoff', () => {
  it('retries while S3 is unreachable, says so, and succeeds once it starts', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'batchwise-s3-late-'));
    const port = await freePort();
    const { logger, lines } = captureLogger();
    const location = parseRepositoryLocation(`s3://127.0.0.1:${port}/${BUCKET}/prod`) as S3RepositoryLocation;
    const repo = new S3ModelSource(location, {
      logger,
      cacheDir: dir,
      clientOptions: { credentials: CREDENTIALS, maxAttempts: 1 },
    });
    let server: S3rver | undefined;
    const late = new Promise<void>((resolve) =>
      setTimeout(
        () =>
          void startS3rver(dir, port).then((s) => {
            server = s.server;
            resolve();
          }),
        1200,
      ),
    );
    try {
      const snapshot = await withBackoff(() => repo.list(), {
        logger,
        what: `listing ${location.url}`,
        initialDelayMs: 200,
        maxDelayMs: 500,
      });
      await late;
      expect(snapshot.models).toEqual([]);
      const warnings = lines.filter((l) => l.level === 40);
      expect(warnings.length).toBeGreaterThanOrEqual(2);
      expect(warnings[0]!.msg).toMatch(
        /^S3 unreachable, retrying in [0-9.]+s \(listing s3:\/\/127\.0\.0\.1:\d+\/models\/prod.*ECONNREFUSED/,
      );
      expect(warnings.every((w) => (w.retryInMs as number) <= 500)).toBe(true);
      expect(lines.at(-1)!.msg).toMatch(/S3 reachable again/);
    } finally {
      await late;
      await server?.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('does not retry errors that waiting cannot fix (a missing bucket)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'batchwise-s3-nobucket-'));
    const { server, port } = await startS3rver(dir);
    const { logger, lines } = captureLogger();
    const location = parseRepositoryLocation(`s3://127.0.0.1:${port}/no-such-bucket`) as S3RepositoryLocation;
    const repo = new S3ModelSource(location, { logger, cacheDir: dir, clientOptions: { credentials: CREDENTIALS } });
    try {
      await expect(withBackoff(() => repo.list(), { logger, what: 'listing', initialDelayMs: 10 })).rejects.toThrow(/bucket/i);
      expect(lines.filter((l) => l.level === 40)).toEqual([]);
    } finally {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
