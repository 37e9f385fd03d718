import type { S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import { parseModelConfig } from '../config/index.ts';
import { declaredCanaryVersions } from './canary-declaration.ts';
import { readModelFolder, type ModelFolder } from './model-folder.ts';
import { childForms, folderForms, modelRelativeMessage } from './model-paths.ts';
import type { ListedModel, ModelSource } from './model-source.ts';
import { RepositoryError } from './repository-error.ts';
import type { S3RepositoryLocation } from './repository-url.ts';
import { ModelCache } from './s3-cache.ts';
import type { CacheSpace } from './cache-space.ts';
import { createS3Client, type S3ClientOptions } from './s3-client.ts';
import { downloadVerified } from './s3-download.ts';
import { S3Listing } from './s3-listing.ts';
import type { ModelListing, RepositorySnapshot } from './snapshot.ts';
import { selectVersions } from './version-policy.ts';

export interface S3ModelSourceOptions {
  readonly logger: Logger;
  /** The local cache that models are downloaded into. */
  readonly cacheDir: string;
  /** Parallel downloads per localize. @default 8 */
  readonly concurrency?: number;
  readonly clientOptions?: S3ClientOptions;
  readonly client?: S3Client;
  /** Attempts per file download (network errors, truncated or garbled bodies). @default 3 */
  readonly downloadAttempts?: number;
  /** Keys per ListObjectsV2 page (tests of pagination). @default - the server's (1000 on S3) */
  readonly listPageSize?: number;
  /** The disk the caches share (--model-cache-disk-limit): versions no model loads stay cached until it needs room. @default - prune deletes them */
  readonly cacheSpace?: CacheSpace;
}

export interface LocalizeOptions {
  /**
   * The model's entry of a snapshot just taken by `list()`: saves a listing request and
   * pins what is downloaded to what the poll saw. @default - the model's prefix is listed
   */
  readonly listing?: ModelListing;
}

/**
 * A model repository under an S3 prefix (Triton layout), composed of its listing
 * (s3-listing.ts), a local cache (s3-cache.ts) and verified downloads (s3-download.ts).
 * One listing per look; localizing a listed model first brings its model-level files
 * (config.pbtxt, labels) up to date in the cache, reads the version policy from there, then
 * downloads only the selected versions' files whose key, size or ETag changed.
 */
export class S3ModelSource implements ModelSource {
  readonly kind = 's3' as const;
  readonly location: string;
  readonly client: S3Client;
  private readonly logger: Logger;
  private readonly listing: S3Listing;
  private readonly cache: ModelCache;

  constructor(
    readonly target: S3RepositoryLocation,
    private readonly options: S3ModelSourceOptions,
  ) {
    this.location = target.url;
    this.client = options.client ?? createS3Client(target, options.clientOptions);
    this.logger = options.logger.child({ repository: target.url });
    this.listing = new S3Listing(this.client, target, options.listPageSize);
    this.cache = new ModelCache(options.cacheDir, this.logger, Math.max(1, options.concurrency ?? 8), options.cacheSpace);
  }

  /** One ListObjectsV2 pagination pass over the repository prefix. */
  list(): Promise<RepositorySnapshot> {
    return this.listing.list();
  }

  async listModels(): Promise<ListedModel[]> {
    const snapshot = await this.list();
    const cache = await folderForms(this.options.cacheDir);
    return snapshot.models.map((listing) => this.listed(listing, cache));
  }

  async findModel(name: string): Promise<ListedModel | undefined> {
    const listing = await this.listing.listModel(name);
    return listing && this.listed(listing, await folderForms(this.options.cacheDir));
  }

  private listed(listing: ModelListing, cache: readonly string[]): ListedModel {
    return {
      name: listing.name,
      localize: () => this.localizeSelected(listing),
      prune: (keep: readonly number[], loaded?: readonly number[]) => this.prune(listing.name, keep, loaded),
      // Its files as the cache holds them and as S3 messages name them (s3://bucket/<key>).
      modelRelative: (message: string) =>
        modelRelativeMessage(message, listing.name, [
          ...childForms(cache, listing.name),
          `s3://${this.target.bucket}/${this.target.prefix}${listing.name}`,
          `${this.location.replace(/\/+$/, '')}/${listing.name}`,
        ]),
    };
  }

  /** config.pbtxt of a model, or undefined when it has none. */
  readConfigText(modelName: string, listing?: ModelListing): Promise<string | undefined> {
    return this.listing.readConfigText(modelName, listing);
  }

  /**
   * Downloads a model's config and the given versions into the cache, verified and
   * all-or-nothing per version folder, skipping files already cached; returns the model's
   * local folder (`<cacheDir>/<model>`). Never removes a version.
   */
  async localize(modelName: string, versions: readonly number[], options: LocalizeOptions = {}): Promise<string> {
    const listing = options.listing ?? (await this.listing.listModel(modelName));
    if (!listing) throw new RepositoryError('NOT_FOUND', `model '${modelName}' not found in ${this.location}`);
    const wanted = [...new Set(versions)].sort((a, b) => a - b);
    const missing = wanted.filter((v) => !listing.versions.some((l) => l.version === v));
    if (missing.length > 0) {
      throw new RepositoryError('NOT_FOUND', `model '${modelName}' has no version ${missing.join(', ')} in ${this.location}`);
    }
    const download = {
      client: this.client,
      bucket: this.target.bucket,
      logger: this.logger,
      ...(this.options.downloadAttempts !== undefined && { attempts: this.options.downloadAttempts }),
    };
    return this.cache.update(listing, wanted, (object, dest, progress) => downloadVerified(object, dest, progress, download));
  }

  /** Removes cached versions not in `keep` (once nothing loaded reads them; with a cache space, only when it needs room). */
  prune(modelName: string, keep: readonly number[], loaded: readonly number[] = keep): Promise<void> {
    return this.cache.prune(modelName, keep, loaded);
  }

  private async localizeSelected(listing: ModelListing): Promise<ModelFolder> {
    const dir = await this.localize(listing.name, [], { listing });
    const modelLevel = await readModelFolder(dir, listing.name);
    const present = listing.versions.map((v) => v.version);
    // A canary declaration (canary.json, a model-level file) adds its two versions to the policy's.
    const declared = (await declaredCanaryVersions(dir)).filter((v) => present.includes(v));
    const selected = [...new Set([...selectForDownload(modelLevel.configText, present, listing.name), ...declared])].sort((a, b) => a - b);
    await this.localize(listing.name, selected, { listing });
    // The cache may still hold versions that loaded versions read; the repository offers only these.
    return { ...(await readModelFolder(dir, listing.name)), versions: selected };
  }
}

/** The versions worth downloading: those the model's own policy selects (latest 1 if it cannot be read). */
function selectForDownload(configText: string | undefined, present: number[], model: string): number[] {
  if (configText === undefined) return selectVersions(present, undefined);
  try {
    return selectVersions(present, parseModelConfig(configText, `${model}/config.pbtxt`).version_policy);
  } catch {
    // The manager reports the config error; meanwhile download what a default policy would serve.
    return selectVersions(present, undefined);
  }
}
