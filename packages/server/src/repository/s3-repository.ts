import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { copyFile, link, mkdir, readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import { backoffDelayMs, describeError } from './backoff.ts';
import { ProgressLog } from './progress.ts';
import { RepositoryError, type LocalizeOptions, type RepositorySource } from './repository-source.ts';
import { formatRepositoryLocation, type S3RepositoryLocation } from './repository-url.ts';
import { createS3Client, type S3ClientOptions } from './s3-client.ts';
import {
  etagIsContentMd5, groupRepositoryObjects, unquoteEtag,
  type ModelListing, type RepositoryObject, type RepositorySnapshot,
} from './snapshot.ts';
import { isVersionName } from './model-folder.ts';

export interface S3RepositoryOptions {
  readonly logger: Logger;
  /** Where `localize()` puts models when not told otherwise. */
  readonly cacheDir: string;
  /** Parallel downloads per localize. @default 8 */
  readonly concurrency?: number;
  readonly clientOptions?: S3ClientOptions;
  readonly client?: S3Client;
  /** Attempts per file download (network errors, truncated or garbled bodies). @default 3 */
  readonly downloadAttempts?: number;
  /** Keys per ListObjectsV2 page (tests of pagination). @default - the server's (1000 on S3) */
  readonly listPageSize?: number;
}

/** What a cached folder holds, written beside its files: path -> ETag and size as listed. */
interface CacheManifest {
  readonly files: Record<string, { readonly etag: string; readonly size: number }>;
}

const MANIFEST = '.batchwise-objects.json';
const MODEL_MANIFEST = '.batchwise-model-objects.json';

/**
 * A model repository under an S3 prefix (Triton layout). `list()` is one ListObjectsV2
 * pagination pass; `localize()` downloads a model's config and chosen versions into a local
 * cache, verified and all-or-nothing per version folder, skipping files already cached;
 * `prune()` removes cached versions once nothing loaded reads them.
 */
export class S3Repository implements RepositorySource {
  readonly kind = 's3' as const;
  readonly location: string;
  readonly client: S3Client;
  private readonly logger: Logger;
  private readonly concurrency: number;
  private readonly downloadAttempts: number;
  /** One localize or prune at a time per local model folder. */
  private readonly localizing = new Map<string, Promise<unknown>>();

  constructor(
    readonly target: S3RepositoryLocation,
    private readonly options: S3RepositoryOptions,
  ) {
    this.location = target.url;
    this.client = options.client ?? createS3Client(target, options.clientOptions);
    this.logger = options.logger.child({ repository: target.url });
    this.concurrency = Math.max(1, options.concurrency ?? 8);
    this.downloadAttempts = Math.max(1, options.downloadAttempts ?? 3);
  }

  /** One ListObjectsV2 pagination pass over the repository prefix. */
  async list(): Promise<RepositorySnapshot> {
    return this.listUnder(this.target.prefix);
  }

  /** One model's entry, listing only its prefix (for a localize without a snapshot). */
  async listModel(modelName: string): Promise<ModelListing | undefined> {
    checkModelName(modelName);
    const snapshot = await this.listUnder(`${this.target.prefix}${modelName}/`);
    return snapshot.models.find((m) => m.name === modelName);
  }

  async readConfigText(modelName: string, listing?: ModelListing): Promise<string | undefined> {
    checkModelName(modelName);
    if (listing && !listing.config) return undefined;
    try {
      const res = await this.client.send(
        new GetObjectCommand({ Bucket: this.target.bucket, Key: `${this.target.prefix}${modelName}/config.pbtxt` }),
      );
      return await res.Body!.transformToString('utf8');
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  async localize(
    modelName: string, versions: readonly number[], cacheDir = this.options.cacheDir, options: LocalizeOptions = {},
  ): Promise<string> {
    checkModelName(modelName);
    const modelDir = join(cacheDir, modelName);
    return this.serialized(modelDir, () => this.localizeNow(modelName, versions, modelDir, options));
  }

  async prune(modelName: string, keep: readonly number[], cacheDir = this.options.cacheDir): Promise<void> {
    checkModelName(modelName);
    const modelDir = join(cacheDir, modelName);
    await this.serialized(modelDir, async () => {
      const entries = await readdir(modelDir, { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        if (entry.isDirectory() && isVersionName(entry.name) && !keep.includes(Number(entry.name))) {
          await rm(join(modelDir, entry.name), { recursive: true, force: true });
          this.logger.info({ model: modelName, version: Number(entry.name) }, 'removed a version no longer loaded from the local cache');
        }
      }
    });
  }

  /** One localize or prune at a time per local model folder. */
  private async serialized<T>(modelDir: string, task: () => Promise<T>): Promise<T> {
    const previous = this.localizing.get(modelDir) ?? Promise.resolve();
    const run = previous.catch(() => undefined).then(task);
    this.localizing.set(modelDir, run);
    try {
      return await run;
    } finally {
      if (this.localizing.get(modelDir) === run) this.localizing.delete(modelDir);
    }
  }

  private async listUnder(prefix: string): Promise<RepositorySnapshot> {
    const files: { relativePath: string; key: string; size: number; etag: string }[] = [];
    let token: string | undefined;
    let requests = 0;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.target.bucket, Prefix: prefix, ContinuationToken: token, MaxKeys: this.options.listPageSize,
        }),
      );
      requests++;
      for (const o of page.Contents ?? []) {
        if (o.Key === undefined) continue;
        files.push({
          relativePath: o.Key.slice(this.target.prefix.length),
          key: o.Key,
          size: o.Size ?? 0,
          etag: unquoteEtag(o.ETag),
        });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return groupRepositoryObjects(formatRepositoryLocation(this.target), files, requests);
  }

  private async localizeNow(
    modelName: string, versions: readonly number[], modelDir: string, options: LocalizeOptions,
  ): Promise<string> {
    const listing = options.listing ?? (await this.listModel(modelName));
    if (!listing) throw new RepositoryError('NOT_FOUND', `model '${modelName}' not found in ${this.location}`);
    const wanted = [...new Set(versions)].sort((a, b) => a - b);
    const missing = wanted.filter((v) => !listing.versions.some((l) => l.version === v));
    if (missing.length > 0) {
      throw new RepositoryError('NOT_FOUND', `model '${modelName}' has no version ${missing.join(', ')} in ${this.location}`);
    }
    await mkdir(modelDir, { recursive: true });
    await removeLeftovers(modelDir);

    // Plan: which files must be fetched, which can be reused from the cache.
    const modelFiles = [...(listing.config ? [listing.config] : []), ...listing.otherFiles];
    const modelManifest = await readManifest(join(modelDir, MODEL_MANIFEST));
    const modelFetch: RepositoryObject[] = [];
    for (const f of modelFiles) {
      if (!(await isCached(modelManifest, f, join(modelDir, f.path)))) modelFetch.push(f);
    }
    const plans = await Promise.all(
      wanted.map(async (version) => {
        const files = listing.versions.find((l) => l.version === version)!.files.map((f) => ({
          ...f, path: f.path.slice(f.path.indexOf('/') + 1),
        }));
        const versionDir = join(modelDir, String(version));
        const manifest = await readManifest(join(versionDir, MANIFEST));
        const cached = await Promise.all(files.map((f) => isCached(manifest, f, join(versionDir, f.path))));
        const upToDate = cached.every(Boolean) && Object.keys(manifest?.files ?? {}).length === files.length;
        return { version, versionDir, files, cached, upToDate };
      }),
    );
    const toFetch = [...modelFetch, ...plans.flatMap((p) => (p.upToDate ? [] : p.files.filter((_, i) => !p.cached[i])))];
    const totalBytes = toFetch.reduce((sum, f) => sum + f.size, 0);
    const log = this.logger.child({ model: modelName, versions: wanted });
    if (toFetch.length === 0) {
      log.debug('model already in the local cache, nothing to download');
    } else {
      log.info({ files: toFetch.length, bytesTotal: totalBytes, cacheDir: modelDir }, 'downloading model from S3');
    }
    const progress = new ProgressLog({ logger: log, msg: 'downloading model from S3', totalBytes, fields: { files: toFetch.length } });
    const pool = new Pool(this.concurrency);

    // Model-level files (config.pbtxt, labels): each replaced atomically by rename.
    const modelJobs = modelFetch.map((f) => pool.run(() => this.download(f, join(modelDir, f.path), progress)));
    // Version folders: staged complete, then renamed into place.
    const versionJobs = plans.filter((p) => !p.upToDate).map(async (plan) => {
      const staging = join(modelDir, `.staging-${plan.version}-${randomBytes(4).toString('hex')}`);
      await mkdir(staging, { recursive: true });
      try {
        await Promise.all(
          plan.files.map(async (f, i) => {
            const dest = join(staging, f.path);
            await mkdir(dirname(dest), { recursive: true });
            if (plan.cached[i]) await linkOrCopy(join(plan.versionDir, f.path), dest);
            else await pool.run(() => this.download(f, dest, progress));
          }),
        );
        await writeManifest(join(staging, MANIFEST), plan.files);
        await swapIntoPlace(staging, plan.versionDir);
        log.info({ version: plan.version, files: plan.files.length, bytes: plan.files.reduce((s, f) => s + f.size, 0) }, 'model version complete in the local cache');
      } catch (error) {
        await rm(staging, { recursive: true, force: true });
        throw error;
      }
    });
    const results = await Promise.allSettled([...modelJobs, ...versionJobs]);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;

    if (!listing.config) await rm(join(modelDir, 'config.pbtxt'), { force: true });
    // Model-level files gone from S3 go from the cache too.
    for (const path of Object.keys(modelManifest?.files ?? {})) {
      if (!modelFiles.some((f) => f.path === path)) await rm(join(modelDir, path), { force: true });
    }
    await writeManifest(join(modelDir, MODEL_MANIFEST), modelFiles);
    if (toFetch.length > 0) progress.finish();
    return modelDir;
  }

  /** Downloads one object to a temp name beside `dest`, verifies it, renames it into place. */
  private async download(object: RepositoryObject, dest: string, progress: ProgressLog): Promise<void> {
    await mkdir(dirname(dest), { recursive: true });
    for (let attempt = 1; ; attempt++) {
      const temp = `${dest}.part-${randomBytes(4).toString('hex')}`;
      let received = 0;
      try {
        // ChecksumMode: the SDK verifies the object's own checksum (CRC, SHA) when it has one.
        const res = await this.client.send(
          new GetObjectCommand({ Bucket: this.target.bucket, Key: object.key, IfMatch: `"${object.etag}"`, ChecksumMode: 'ENABLED' }),
        );
        const md5 = createHash('md5');
        const counter = new Transform({
          transform(chunk: Buffer, _encoding, callback) {
            received += chunk.length;
            md5.update(chunk);
            progress.add(chunk.length);
            callback(null, chunk);
          },
        });
        await pipeline(res.Body as Readable, counter, createWriteStream(temp));
        if (received !== object.size) {
          throw new RepositoryError(
            'INTEGRITY',
            `s3://${this.target.bucket}/${object.key}: received ${received} bytes, the listing says ${object.size}`,
          );
        }
        const digest = md5.digest('hex');
        const md5Etag = etagIsContentMd5({
          etag: object.etag, serverSideEncryption: res.ServerSideEncryption, sseCustomerAlgorithm: res.SSECustomerAlgorithm,
        });
        if (md5Etag && digest !== object.etag.toLowerCase()) {
          throw new RepositoryError(
            'INTEGRITY',
            `s3://${this.target.bucket}/${object.key}: MD5 of the received bytes is ${digest}, the ETag says ${object.etag}`,
          );
        }
        const responseEtag = unquoteEtag(res.ETag);
        if (!md5Etag && responseEtag !== '' && responseEtag !== object.etag) {
          throw new RepositoryError(
            'INTEGRITY',
            `s3://${this.target.bucket}/${object.key} changed since it was listed (ETag ${responseEtag}, listed ${object.etag})`,
          );
        }
        await rename(temp, dest);
        return;
      } catch (error) {
        progress.subtract(received);
        await unlink(temp).catch(() => undefined);
        if (attempt >= this.downloadAttempts || isNotFound(error) || isPreconditionFailed(error)) {
          if (isPreconditionFailed(error)) {
            throw new RepositoryError('INTEGRITY', `s3://${this.target.bucket}/${object.key} changed since it was listed`);
          }
          throw error;
        }
        const delayMs = backoffDelayMs(attempt, 200, 5000);
        this.logger.warn(
          { key: object.key, attempt, retryInMs: delayMs, err: describeError(error) },
          `download of ${object.key} failed, retrying in ${Math.round(delayMs / 100) / 10}s: ${describeError(error)}`,
        );
        await new Promise((r) => setTimeout(r, delayMs));
      }
    }
  }
}

/** Runs at most `limit` tasks at once. */
class Pool {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      return await task();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

function checkModelName(name: string): void {
  if (name === '' || name.includes('/') || name === '.' || name === '..' || name.startsWith('.')) {
    throw new RepositoryError('INVALID', `'${name}' is not a model name`);
  }
}

async function readManifest(path: string): Promise<CacheManifest | undefined> {
  try {
    const parsed = JSON.parse(await readFile(path, 'utf8')) as CacheManifest;
    return typeof parsed?.files === 'object' && parsed.files !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

async function writeManifest(path: string, files: readonly RepositoryObject[]): Promise<void> {
  const manifest: CacheManifest = { files: Object.fromEntries(files.map((f) => [f.path, { etag: f.etag, size: f.size }])) };
  const temp = `${path}.part-${randomBytes(4).toString('hex')}`;
  await writeFile(temp, JSON.stringify(manifest));
  await rename(temp, path);
}

/** Same ETag and size as when it was downloaded, and the file is still there whole in size. */
async function isCached(manifest: CacheManifest | undefined, object: RepositoryObject, path: string): Promise<boolean> {
  const entry = manifest?.files[object.path];
  if (!entry || entry.etag !== object.etag || entry.size !== object.size) return false;
  const s = await stat(path).catch(() => undefined);
  return s?.isFile() === true && s.size === object.size;
}

async function linkOrCopy(from: string, to: string): Promise<void> {
  try {
    await link(from, to);
  } catch {
    await copyFile(from, to);
  }
}

/** Puts a complete staging folder at `dir`, replacing what was there; `dir` is never partial. */
async function swapIntoPlace(staging: string, dir: string): Promise<void> {
  try {
    await rename(staging, dir);
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
  }
  const old = `${dirname(dir)}/.old-${randomBytes(4).toString('hex')}`;
  await rename(dir, old);
  await rename(staging, dir);
  await rm(old, { recursive: true, force: true });
}

/** Staging folders and temp files left by a crash. */
async function removeLeftovers(modelDir: string): Promise<void> {
  for (const entry of await readdir(modelDir, { withFileTypes: true })) {
    if (/^\.(staging|old)-/.test(entry.name) || /\.part-[0-9a-f]{8}$/.test(entry.name)) {
      await rm(join(modelDir, entry.name), { recursive: true, force: true });
    }
  }
}

function isNotFound(error: unknown): boolean {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

function isPreconditionFailed(error: unknown): boolean {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'PreconditionFailed' || e?.$metadata?.httpStatusCode === 412;
}
