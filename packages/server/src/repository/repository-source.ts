import type { ModelListing, RepositorySnapshot } from './snapshot.ts';

export interface LocalizeOptions {
  /**
   * The model's entry of a snapshot just taken by `list()`: saves a listing request and
   * pins what is downloaded to what the poll saw. @default - the model's prefix is listed
   */
  readonly listing?: ModelListing;
}

/**
 * Where models come from, the same way for a local folder and an S3 prefix: `list()` is one
 * cheap look that change detection compares (fingerprints of keys, sizes and ETags);
 * `localize()` makes a model's config and chosen versions available as a local folder in
 * Triton layout, each version folder complete or absent.
 */
export interface RepositorySource {
  readonly kind: 'local' | 's3';
  /** The location as given (for logs, the repository index, errors). */
  readonly location: string;
  list(): Promise<RepositorySnapshot>;
  /** config.pbtxt of a model, or undefined when it has none (auto-complete). */
  readConfigText(modelName: string, listing?: ModelListing): Promise<string | undefined>;
  /**
   * Returns the local model folder (`<dir>/config.pbtxt`, `<dir>/<version>/...`). A local
   * repository returns its own folder; S3 downloads into `cacheDir` (or the source's).
   */
  localize(modelName: string, versions: readonly number[], cacheDir?: string, options?: LocalizeOptions): Promise<string>;
  /**
   * Removes version folders of the local copy that are not in `keep` (S3: from the cache; a
   * local repository is never touched). Localizing never removes a version: a loaded version
   * may need its files again (an instance restarted after a crash).
   */
  prune(modelName: string, keep: readonly number[], cacheDir?: string): Promise<void>;
}

export class RepositoryError extends Error {
  override readonly name = 'RepositoryError';
  constructor(
    readonly code: 'NOT_FOUND' | 'INTEGRITY' | 'INVALID',
    message: string,
  ) {
    super(message);
  }
}
