import type { ModelFolder } from './model-folder.ts';
import type { RepositorySnapshot } from './snapshot.ts';

/**
 * A model folder one look at a repository found, before anything of it is downloaded: the
 * model manager localizes only the models it loads, and prunes cached versions only once no
 * loaded version reads them any more.
 */
export interface ListedModel {
  readonly name: string;
  /** The model as a local folder in Triton layout, holding the versions its config selects (S3: downloaded). */
  localize(): Promise<ModelFolder>;
  /**
   * Drops cached version folders not in `keep`; `loaded` are the versions loaded versions read
   * (@default keep). A
   * cache that keeps what it downloaded (--load-on-demand, --model-cache-disk-limit) drops nothing
   * here: the versions not loaded become its least recently used candidates for deletion instead.
   * A local repository's own folders are never touched.
   */
  prune(keep: readonly number[], loaded?: readonly number[]): Promise<void>;
  /**
   * A message about this model (a load failure, Node's or ONNX Runtime's words) with the places
   * its files are read from written as the model's name: what the API answers names
   * model-relative paths only (model-paths.ts).
   */
  modelRelative(message: string): string;
}

/**
 * Where models come from, the same way for a local folder (local-model-source.ts) and an S3
 * prefix (s3-model-source.ts); create-model-source.ts picks one for a location.
 */
export interface ModelSource {
  readonly kind: 'local' | 's3';
  /** The location as given (for logs, the repository index, errors). */
  readonly location: string;
  /** One look at the repository's model folders, nothing downloaded (S3: one ListObjectsV2 pass). */
  listModels(): Promise<ListedModel[]>;
  /**
   * One look for one model folder, for a request naming a model the last listing did not have
   * (--load-on-demand); undefined when the repository has none of that name (S3: one ListObjectsV2
   * under its prefix). `name` is a valid folder name (checkModelName).
   */
  findModel(name: string): Promise<ListedModel | undefined>;
  /**
   * One look at every file of the repository, with sizes and fingerprints (keys, sizes and
   * ETags; a local file's mtime stands in for an ETag): what promotion reads versions from.
   */
  list(): Promise<RepositorySnapshot>;
}
