import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import { LocalRepository } from './local-repository.ts';
import type { RepositorySource } from './repository-source.ts';
import { parseRepositoryLocation, type RepositoryLocation } from './repository-url.ts';
import type { S3ClientOptions } from './s3-client.ts';
import { S3Repository } from './s3-repository.ts';

export interface RepositorySourceOptions {
  readonly logger: Logger;
  /** Local cache of remote repositories. @default - `<tmpdir>/batchwise-cache/<hash of the location>` */
  readonly cacheDir?: string;
  /** Parallel downloads per localize. @default 8 */
  readonly concurrency?: number;
  readonly s3?: S3ClientOptions;
  /** An S3 client to use instead of creating one (tests, sharing). */
  readonly s3Client?: S3Client;
}

/** Where a remote repository's models are cached when no cache folder is given. */
export function defaultCacheDir(repositoryUrl: string): string {
  return join(tmpdir(), 'batchwise-cache', createHash('sha256').update(repositoryUrl).digest('hex').slice(0, 16));
}

export function createRepositorySource(location: string | RepositoryLocation, options: RepositorySourceOptions): RepositorySource {
  const parsed = typeof location === 'string' ? parseRepositoryLocation(location) : location;
  if (parsed.kind === 'local') return new LocalRepository(parsed.path);
  const cacheDir = options.cacheDir ?? defaultCacheDir(parsed.url);
  return new S3Repository(parsed, {
    logger: options.logger,
    cacheDir,
    ...(options.concurrency !== undefined && { concurrency: options.concurrency }),
    ...(options.s3 !== undefined && { clientOptions: options.s3 }),
    ...(options.s3Client !== undefined && { client: options.s3Client }),
  });
}
