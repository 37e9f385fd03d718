import type { Logger } from 'pino';
import { parseModelConfig } from '../config/index.ts';
import { readModelFolder, scanRepository, type ModelFolder } from './model-folder.ts';
import { createRepositorySource, type RepositorySource, type RepositorySourceOptions } from './repository-source.ts';
import { parseRepositoryLocation } from './repository-url.ts';
import { selectVersions } from './version-policy.ts';

/**
 * Where models come from, as the model manager sees it: local folders in Triton layout.
 * Remote repositories (s3://) localize the versions their config selects into a cache folder.
 */
export interface ModelSource {
  readonly location: string;
  /** One look at the repository: every model folder, with its selected versions present locally. */
  listModels(): Promise<ModelFolder[]>;
}

export function folderSource(root: string): ModelSource {
  return { location: root, listModels: () => scanRepository(root) };
}

/** A source for any repository location the CLI accepts: a folder, or s3://... */
export function modelSourceFor(location: string, options: RepositorySourceOptions): ModelSource {
  const parsed = parseRepositoryLocation(location);
  if (parsed.kind === 'local') return folderSource(parsed.path);
  return remoteModelSource(createRepositorySource(parsed, options), options.logger);
}

/**
 * One listing per poll; config.pbtxt is fetched only when its ETag changes, and only files
 * whose key, size or ETag changed are downloaded (the source's localize skips the rest).
 */
export function remoteModelSource(source: RepositorySource, logger: Logger): ModelSource {
  const configs = new Map<string, { fingerprint: string; text: string | undefined }>();
  return {
    location: source.location,
    async listModels() {
      const snapshot = await source.list();
      const folders: ModelFolder[] = [];
      for (const model of snapshot.models) {
        let cached = configs.get(model.name);
        if (cached?.fingerprint !== model.configFingerprint) {
          cached = { fingerprint: model.configFingerprint, text: await source.readConfigText(model.name, model) };
          configs.set(model.name, cached);
        }
        const present = model.versions.map((v) => v.version);
        const dir = await source.localize(model.name, selectForDownload(cached.text, present, model.name, logger), undefined, {
          listing: model,
        });
        folders.push(await readModelFolder(dir, model.name));
      }
      return folders;
    },
  };
}

/** The versions worth downloading: those the model's own policy selects (latest 1 if it cannot be read). */
function selectForDownload(configText: string | undefined, present: number[], model: string, logger: Logger): number[] {
  if (configText === undefined) return selectVersions(present, undefined);
  try {
    return selectVersions(present, parseModelConfig(configText, `${model}/config.pbtxt`).version_policy);
  } catch {
    // The manager reports the config error; download what a default policy would serve meanwhile.
    logger.debug({ model }, 'config.pbtxt does not parse; localizing the latest version only');
    return selectVersions(present, undefined);
  }
}
