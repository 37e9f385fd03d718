import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { LocalizeOptions, RepositorySource } from './repository-source.ts';
import { RepositoryError } from './repository-source.ts';
import { listVersionFolders } from './model-folder.ts';
import { groupRepositoryObjects, type ModelListing, type RepositorySnapshot } from './snapshot.ts';

/**
 * A repository folder on the local disk. Its listing walks the model folders; files have no
 * ETag, so size and mtime stand in for it in fingerprints. Localizing is the folder itself.
 */
export class LocalRepository implements RepositorySource {
  readonly kind = 'local' as const;
  constructor(readonly location: string) {}

  async list(): Promise<RepositorySnapshot> {
    const files: { relativePath: string; key: string; size: number; etag: string }[] = [];
    const walk = async (dir: string, relative: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true });
      for (const entry of entries) {
        if (entry.name.startsWith('.')) continue;
        const path = join(dir, entry.name);
        const rel = relative === '' ? entry.name : `${relative}/${entry.name}`;
        if (entry.isDirectory()) await walk(path, rel);
        else if (relative !== '') {
          const s = await stat(path).catch(() => undefined);
          if (s?.isFile()) files.push({ relativePath: rel, key: path, size: s.size, etag: `mtime:${s.mtimeMs}` });
        }
      }
    };
    await walk(this.location, '');
    return groupRepositoryObjects(this.location, files, 0);
  }

  async readConfigText(modelName: string): Promise<string | undefined> {
    return readFile(join(this.location, modelName, 'config.pbtxt'), 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
  }

  async localize(modelName: string, versions: readonly number[], _cacheDir?: string, options: LocalizeOptions = {}): Promise<string> {
    const dir = join(this.location, modelName);
    const present = new Set(options.listing ? options.listing.versions.map((v) => v.version) : await listVersionFolders(dir));
    const missing = versions.filter((v) => !present.has(v));
    if (missing.length > 0) {
      throw new RepositoryError('NOT_FOUND', `model '${modelName}' has no version ${missing.join(', ')} in ${this.location}`);
    }
    return dir;
  }

  async prune(): Promise<void> {
    // The repository is the user's own folder: nothing is ever deleted from it.
  }
}

export type { ModelListing };
