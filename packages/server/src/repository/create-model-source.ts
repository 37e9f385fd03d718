import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import { LocalModelSource } from './local-model-source.ts';
import type { ModelSource } from './model-source.ts';
import { parseRepositoryLocation, type RepositoryLocation } from './repository-url.ts';
import type { S3ClientOptions } from './s3-client.ts';
import type { CacheSpace } from './cache-space.ts';
import { S3ModelSource } from './s3-model-source.ts';

export interface ModelSourceOptions {
  readonly logger: Logger;
  /** Local cache of remote repositories. @default - `<tmpdir>/batchwise-cache/<hash of the location>` */
  readonly cacheDir?: string;
  /** Parallel downloads per localize. @default 8 */
  readonly concurrency?: number;
  readonly s3?: S3ClientOptions;
  /** An S3 client to use instead of creating one (tests, sharing). */
  readonly s3Client?: S3Client;
  /** The disk the local caches of every s3:// repository share (--model-cache-disk-limit). @default - none: prune deletes what no model loads */
  readonly cacheSpace?: CacheSpace;
}

/** Where a remote repository's models are cached when no cache folder is given. */
export function defaultCacheDir(repositoryUrl: string): string {
  return join(tmpdir(), 'batchwise-cache', createHash('sha256').update(repositoryUrl).digest('hex').slice(0, 16));
}

/** A source for any repository location the CLI accepts: a folder, or s3://... */
export function createModelSource(location: string | RepositoryLocation, options: ModelSourceOptions): ModelSource {
  const parsed = typeof location === 'string' ? parseRepositoryLocation(location) : location;
  if (parsed.kind === 'local') return new LocalModelSource(parsed.path);
  return new S3ModelSource(parsed, {
    logger: options.logger,
    cacheDir: options.cacheDir ?? defaultCacheDir(parsed.url),
    ...(options.concurrency !== undefined && { concurrency: options.concurrency }),
    ...(options.s3 !== undefined && { clientOptions: options.s3 }),
    ...(options.s3Client !== undefined && { client: options.s3Client }),
    ...(options.cacheSpace !== undefined && { cacheSpace: options.cacheSpace }),
  });
}
