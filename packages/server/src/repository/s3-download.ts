import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import { withBackoff } from './backoff.ts';
import type { ProgressLog } from './progress.ts';
import { RepositoryError } from './repository-error.ts';
import { isNotFound, isPreconditionFailed } from './s3-client.ts';
import { etagIsContentMd5, unquoteEtag, type RepositoryObject } from './snapshot.ts';

export interface VerifiedDownloadOptions {
  readonly client: S3Client;
  readonly bucket: string;
  readonly logger: Logger;
  /** Attempts per file (network errors, truncated or garbled bodies). @default 3 */
  readonly attempts?: number;
}

/**
 * Downloads one listed object to a temp name beside `dest`, verifies it (size as listed; the
 * MD5 where the ETag is one, else the ETag as listed; the object's own checksum by the SDK) and
 * renames it into place. A failed attempt leaves nothing and is retried with backoff, except a
 * missing object or one changed since it was listed (If-Match), which no wait fixes.
 */
export async function downloadVerified(
  object: RepositoryObject,
  dest: string,
  progress: ProgressLog,
  options: VerifiedDownloadOptions,
): Promise<void> {
  await mkdir(dirname(dest), { recursive: true });
  try {
    await withBackoff(() => downloadOnce(object, dest, progress, options), {
      logger: options.logger,
      what: `downloading s3://${options.bucket}/${object.key}`,
      failure: 'download failed',
      initialDelayMs: 200,
      maxDelayMs: 5000,
      maxAttempts: Math.max(1, options.attempts ?? 3),
      isRetryable: (error) => !isNotFound(error) && !isPreconditionFailed(error),
    });
  } catch (error) {
    if (isPreconditionFailed(error)) {
      throw new RepositoryError('INTEGRITY', `s3://${options.bucket}/${object.key} changed since it was listed`);
    }
    throw error;
  }
}

async function downloadOnce(
  object: RepositoryObject,
  dest: string,
  progress: ProgressLog,
  options: VerifiedDownloadOptions,
): Promise<void> {
  const { client, bucket } = options;
  const temp = `${dest}.part-${randomBytes(4).toString('hex')}`;
  let received = 0;
  try {
    // ChecksumMode: the SDK verifies the object's own checksum (CRC, SHA) when it has one.
    const res = await client.send(
      new GetObjectCommand({ Bucket: bucket, Key: object.key, IfMatch: `"${object.etag}"`, ChecksumMode: 'ENABLED' }),
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
      throw new RepositoryError('INTEGRITY', `s3://${bucket}/${object.key}: received ${received} bytes, the listing says ${object.size}`);
    }
    const digest = md5.digest('hex');
    const md5Etag = etagIsContentMd5({
      etag: object.etag,
      serverSideEncryption: res.ServerSideEncryption,
      sseCustomerAlgorithm: res.SSECustomerAlgorithm,
    });
    if (md5Etag && digest !== object.etag.toLowerCase()) {
      throw new RepositoryError(
        'INTEGRITY',
        `s3://${bucket}/${object.key}: MD5 of the received bytes is ${digest}, the ETag says ${object.etag}`,
      );
    }
    const responseEtag = unquoteEtag(res.ETag);
    if (!md5Etag && responseEtag !== '' && responseEtag !== object.etag) {
      throw new RepositoryError(
        'INTEGRITY',
        `s3://${bucket}/${object.key} changed since it was listed (ETag ${responseEtag}, listed ${object.etag})`,
      );
    }
    await rename(temp, dest);
  } catch (error) {
    progress.subtract(received);
    await unlink(temp).catch(() => undefined);
    throw error;
  }
}
