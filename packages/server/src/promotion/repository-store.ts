import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { link, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import { LocalModelSource } from '../repository/local-model-source.ts';
import type { ModelSource } from '../repository/model-source.ts';
import { ProgressLog } from '../repository/progress.ts';
import { RepositoryError } from '../repository/repository-error.ts';
import { parseRepositoryLocation, type RepositoryLocation, type S3RepositoryLocation } from '../repository/repository-url.ts';
import { createS3Client, isPreconditionFailed, type S3ClientOptions } from '../repository/s3-client.ts';
import { S3ModelSource } from '../repository/s3-model-source.ts';
import { etagIsContentMd5, unquoteEtag } from '../repository/snapshot.ts';

/** config.pbtxt as stored, with the token that a conditional rewrite checks. */
export interface StoredConfig {
  readonly text: string;
  /** S3 ETag or local mtime; passed back to `replaceConfig` for optimistic concurrency. */
  readonly revision: string;
}

/**
 * Write access to a repository, for promotion: the single-object pointer rewrite and the
 * upload of a new version that becomes visible only whole.
 */
export interface RepositoryStore {
  readonly source: ModelSource;
  readonly location: string;
  readConfig(model: string): Promise<StoredConfig | undefined>;
  /**
   * Replaces config.pbtxt in one atomic step (S3: one PutObject, conditional on `revision`
   * where the server supports If-Match; local: write a temp file, rename over). Resolves with
   * the new revision, for a further conditional rewrite.
   */
  replaceConfig(model: string, text: string, revision: string): Promise<string>;
  /**
   * Writes the config.pbtxt of a model that has none, in one step; refuses when one exists (S3:
   * one PutObject with If-None-Match where the server honours it; local: a temp file hard-linked
   * into place, which fails if the name exists). Resolves with its revision.
   */
  createConfig(model: string, text: string): Promise<string>;
  /**
   * Uploads `file` as `<model>/<version>/<fileName>`; refuses when the version exists.
   * Local: staged in a hidden folder and renamed into place. S3: one PutObject with
   * Content-MD5, checked afterwards with HeadObject.
   */
  uploadVersion(model: string, version: number, fileName: string, file: string, logger: Logger): Promise<{ bytes: number; sha256: string }>;
  /** A model-level file beside config.pbtxt (canary.json), or undefined when there is none. */
  readModelFile(model: string, name: string): Promise<string | undefined>;
  /** Writes a model-level file in one step (S3: one PutObject; local: temp file renamed over). */
  writeModelFile(model: string, name: string, text: string): Promise<void>;
  /** Removes a model-level file; nothing when there is none. */
  removeModelFile(model: string, name: string): Promise<void>;
}

export interface RepositoryStoreOptions {
  readonly logger: Logger;
  readonly s3?: S3ClientOptions;
  readonly s3Client?: S3Client;
}

/** Largest object a single PutObject may create. */
export const MAX_SINGLE_PUT_BYTES = 5 * 1024 ** 3;

export function openRepositoryStore(location: string | RepositoryLocation, options: RepositoryStoreOptions): RepositoryStore {
  const parsed = typeof location === 'string' ? parseRepositoryLocation(location) : location;
  if (parsed.kind === 'local') return new LocalStore(parsed.path);
  return new S3Store(parsed, options);
}

function configAppeared(model: string): RepositoryError {
  return new RepositoryError('INVALID', `config.pbtxt of '${model}' appeared while the model was being created; run the command again`);
}

async function hashFile(path: string): Promise<{ md5: Buffer; sha256: string; bytes: number }> {
  const md5 = createHash('md5');
  const sha = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(path)) {
    md5.update(chunk as Buffer);
    sha.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { md5: md5.digest(), sha256: sha.digest('hex'), bytes };
}

function progressStream(progress: ProgressLog): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      progress.add(chunk.length);
      callback(null, chunk);
    },
  });
}

class LocalStore implements RepositoryStore {
  readonly source: LocalModelSource;
  constructor(readonly location: string) {
    this.source = new LocalModelSource(location);
  }

  async readConfig(model: string): Promise<StoredConfig | undefined> {
    const path = join(this.location, model, 'config.pbtxt');
    try {
      const [text, s] = await Promise.all([readFile(path, 'utf8'), stat(path)]);
      return { text, revision: `mtime:${s.mtimeMs}:${s.size}` };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  readModelFile(model: string, name: string): Promise<string | undefined> {
    return readFile(join(this.location, model, name), 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
  }

  async writeModelFile(model: string, name: string, text: string): Promise<void> {
    const temp = join(this.location, model, `.${name}.${randomBytes(4).toString('hex')}`);
    await writeFile(temp, text);
    await rename(temp, join(this.location, model, name));
  }

  async removeModelFile(model: string, name: string): Promise<void> {
    await rm(join(this.location, model, name), { force: true });
  }

  async replaceConfig(model: string, text: string, revision: string): Promise<string> {
    const current = await this.readConfig(model);
    if (current?.revision !== revision) {
      throw new RepositoryError('INVALID', `config.pbtxt of '${model}' changed while promoting; run the command again`);
    }
    const path = join(this.location, model, 'config.pbtxt');
    const temp = join(this.location, model, `.config.pbtxt.${randomBytes(4).toString('hex')}`);
    await writeFile(temp, text);
    await rename(temp, path);
    return (await this.readConfig(model))!.revision;
  }

  async createConfig(model: string, text: string): Promise<string> {
    await mkdir(join(this.location, model), { recursive: true });
    const temp = join(this.location, model, `.config.pbtxt.${randomBytes(4).toString('hex')}`);
    await writeFile(temp, text);
    try {
      await link(temp, join(this.location, model, 'config.pbtxt'));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw configAppeared(model);
      throw error;
    } finally {
      await rm(temp, { force: true });
    }
    return (await this.readConfig(model))!.revision;
  }

  async uploadVersion(model: string, version: number, fileName: string, file: string, logger: Logger) {
    const modelDir = join(this.location, model);
    const target = join(modelDir, String(version));
    if (
      await stat(target).then(
        () => true,
        () => false,
      )
    ) {
      throw new RepositoryError('INVALID', `version ${version} of '${model}' already exists in ${this.location}`);
    }
    const { sha256, bytes } = await hashFile(file);
    const staging = join(modelDir, `.promote-${version}-${randomBytes(4).toString('hex')}`);
    await mkdir(staging, { recursive: true });
    try {
      const progress = new ProgressLog({ logger, msg: 'uploading model version', totalBytes: bytes, fields: { model, version, file } });
      await pipeline(createReadStream(file), progressStream(progress), createWriteStream(join(staging, fileName)));
      progress.finish();
      await rename(staging, target);
    } catch (error) {
      await rm(staging, { recursive: true, force: true });
      throw error;
    }
    return { bytes, sha256 };
  }
}

class S3Store implements RepositoryStore {
  readonly source: S3ModelSource;
  readonly location: string;
  private readonly client: S3Client;
  constructor(
    private readonly target: S3RepositoryLocation,
    options: RepositoryStoreOptions,
  ) {
    this.client = options.s3Client ?? createS3Client(target, options.s3);
    this.location = target.url;
    this.source = new S3ModelSource(target, { logger: options.logger, cacheDir: '', client: this.client });
  }

  private key(model: string, rest: string): string {
    return `${this.target.prefix}${model}/${rest}`;
  }

  async readConfig(model: string): Promise<StoredConfig | undefined> {
    return this.get(model, 'config.pbtxt');
  }

  private async get(model: string, name: string): Promise<StoredConfig | undefined> {
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.target.bucket, Key: this.key(model, name) }));
      return { text: await res.Body!.transformToString('utf8'), revision: unquoteEtag(res.ETag) };
    } catch (error) {
      const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
      if (e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return undefined;
      throw error;
    }
  }

  async readModelFile(model: string, name: string): Promise<string | undefined> {
    return (await this.get(model, name))?.text;
  }

  async writeModelFile(model: string, name: string, text: string): Promise<void> {
    const body = Buffer.from(text, 'utf8');
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.target.bucket,
        Key: this.key(model, name),
        Body: body,
        ContentLength: body.length,
        ContentMD5: createHash('md5').update(body).digest('base64'),
        ContentType: 'application/json',
      }),
    );
  }

  async removeModelFile(model: string, name: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.target.bucket, Key: this.key(model, name) }));
  }

  async replaceConfig(model: string, text: string, revision: string): Promise<string> {
    // Conditional write (S3 since 2024): a concurrent promotion makes this fail instead of
    // silently losing one of the two. Servers without conditional writes ignore it.
    const put = await this.client.send(this.putConfig(model, text, { IfMatch: `"${revision}"` }));
    return unquoteEtag(put.ETag) || (await this.readConfig(model))!.revision;
  }

  /** The PUT of a model's config.pbtxt, on the condition given. */
  private putConfig(model: string, text: string, condition: { IfMatch: string } | { IfNoneMatch: '*' }): PutObjectCommand {
    const body = Buffer.from(text, 'utf8');
    return new PutObjectCommand({
      Bucket: this.target.bucket,
      Key: this.key(model, 'config.pbtxt'),
      Body: body,
      ContentLength: body.length,
      ContentMD5: createHash('md5').update(body).digest('base64'),
      ContentType: 'text/plain; charset=utf-8',
      ...condition,
    });
  }

  async createConfig(model: string, text: string): Promise<string> {
    // S3-compatible servers without conditional writes ignore If-None-Match: look first as well.
    if ((await this.readConfig(model)) !== undefined) throw configAppeared(model);
    const put = await this.client.send(this.putConfig(model, text, { IfNoneMatch: '*' })).catch((error: unknown) => {
      throw isPreconditionFailed(error) ? configAppeared(model) : error;
    });
    return unquoteEtag(put.ETag) || (await this.readConfig(model))!.revision;
  }

  async uploadVersion(model: string, version: number, fileName: string, file: string, logger: Logger) {
    const key = this.key(model, `${version}/${fileName}`);
    const { md5, sha256, bytes } = await hashFile(file);
    if (bytes > MAX_SINGLE_PUT_BYTES) {
      throw new RepositoryError('INVALID', `${file} is ${bytes} bytes; one S3 PutObject takes at most 5 GiB`);
    }
    const progress = new ProgressLog({ logger, msg: 'uploading model version', totalBytes: bytes, fields: { model, version, key } });
    const body = createReadStream(file).pipe(progressStream(progress));
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.target.bucket,
        Key: key,
        Body: body,
        ContentLength: bytes,
        // S3 refuses the object unless these bytes arrived: no truncated upload is stored.
        ContentMD5: md5.toString('base64'),
        ContentType: 'application/octet-stream',
        IfNoneMatch: '*',
        Metadata: { 'batchwise-sha256': sha256 },
      }),
    );
    progress.finish();
    const head = await this.client.send(new HeadObjectCommand({ Bucket: this.target.bucket, Key: key }));
    const etag = unquoteEtag(head.ETag);
    // SSE-KMS / SSE-C buckets: the ETag is no MD5; S3 checked Content-MD5 on arrival, and the
    // stored object must still carry this upload's size and SHA-256.
    const md5Etag = etagIsContentMd5({
      etag,
      serverSideEncryption: head.ServerSideEncryption,
      sseCustomerAlgorithm: head.SSECustomerAlgorithm,
    });
    const mismatch =
      head.ContentLength !== bytes ||
      (md5Etag ? etag.toLowerCase() !== md5.toString('hex') : head.Metadata?.['batchwise-sha256'] !== sha256);
    if (mismatch) {
      throw new RepositoryError(
        'INTEGRITY',
        `s3://${this.target.bucket}/${key} holds ${head.ContentLength} bytes with ETag ${etag} after the upload; ` +
          `expected ${bytes} bytes with ${md5Etag ? `MD5 ${md5.toString('hex')}` : `SHA-256 ${sha256}`}`,
      );
    }
    return { bytes, sha256 };
  }
}
