import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { parseModelConfig } from '../config/index.ts';
import { readModelFolder, type ModelFolder } from './model-folder.ts';
import { createRepositorySource, type RepositorySourceOptions } from './create-repository-source.ts';
import type { RepositorySource } from './repository-source.ts';
import { parseRepositoryLocation } from './repository-url.ts';
import type { ModelListing } from './snapshot.ts';
import { selectVersions } from './version-policy.ts';

/**
 * A model folder one look at a repository found, before anything of it is downloaded: the
 * model manager localizes only the models it loads, and prunes cached versions only once no
 * loaded version reads them any more.
 */
export interface ListedModel {
  readonly name: string;
  /** The model as a local folder in Triton layout, holding the versions its config selects (S3: downloaded). */
  localize(): Promise<ModelFolder>;
  /** Drops cached version folders not in `keep`. A local repository's own folders are never touched. */
  prune(keep: readonly number[]): Promise<void>;
}

/** Where models come from, as the model manager sees it. */
export interface ModelSource {
  readonly location: string;
  /** One look at the repository (S3: one ListObjectsV2 pass): its model folders, nothing downloaded. */
  listModels(): Promise<ListedModel[]>;
}

export function folderSource(root: string): ModelSource {
  return {
    location: root,
    async listModels() {
      const entries = await readdir(root, { withFileTypes: true });
      return entries
        .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
        .map((e) => e.name)
        .sort()
        .map((name) => ({ name, localize: () => readModelFolder(join(root, name), name), prune: async () => undefined }));
    },
  };
}

/** A source for any repository location the CLI accepts: a folder, or s3://... */
export function modelSourceFor(location: string, options: RepositorySourceOptions): ModelSource {
  const parsed = parseRepositoryLocation(location);
  if (parsed.kind === 'local') return folderSource(parsed.path);
  return remoteModelSource(createRepositorySource(parsed, options));
}

/**
 * One listing per look; localizing a model first brings its model-level files (config.pbtxt,
 * labels) up to date in the cache, reads the version policy from there, then downloads only
 * the selected versions' files whose key, size or ETag changed. config.pbtxt is fetched once
 * per change.
 */
export function remoteModelSource(source: RepositorySource): ModelSource {
  return {
    location: source.location,
    async listModels() {
      const snapshot = await source.list();
      return snapshot.models.map((listing) => ({
        name: listing.name,
        localize: () => localizeSelected(source, listing),
        prune: (keep: readonly number[]) => source.prune(listing.name, keep),
      }));
    },
  };
}

async function localizeSelected(source: RepositorySource, listing: ModelListing): Promise<ModelFolder> {
  const dir = await source.localize(listing.name, [], undefined, { listing });
  const modelLevel = await readModelFolder(dir, listing.name);
  const present = listing.versions.map((v) => v.version);
  const selected = selectForDownload(modelLevel.configText, present, listing.name);
  await source.localize(listing.name, selected, undefined, { listing });
  // The cache may still hold versions that loaded versions read; the repository offers only these.
  return { ...(await readModelFolder(dir, listing.name)), versions: selected };
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
