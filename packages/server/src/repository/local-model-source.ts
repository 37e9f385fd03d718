import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { readModelFolder } from './model-folder.ts';
import { childForms, folderForms, modelRelativeMessage } from './model-paths.ts';
import type { ListedModel, ModelSource } from './model-source.ts';
import { groupRepositoryObjects, type RepositorySnapshot } from './snapshot.ts';

/**
 * A repository folder on the local disk. Its models are its own folders: localizing reads one
 * as it is (every version folder present), and nothing is ever pruned from it. Its listing of
 * files has no ETags: size and mtime stand in for them in fingerprints.
 */
export class LocalModelSource implements ModelSource {
  readonly kind = 'local' as const;
  constructor(readonly location: string) {}

  async listModels(): Promise<ListedModel[]> {
    const entries = await readdir(this.location, { withFileTypes: true });
    const repository = await folderForms(this.location);
    return entries
      .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
      .map((e) => e.name)
      .sort()
      .map((name) => this.listed(name, repository));
  }

  async findModel(name: string): Promise<ListedModel | undefined> {
    const found = await stat(join(this.location, name)).catch(() => undefined);
    return found?.isDirectory() ? this.listed(name, await folderForms(this.location)) : undefined;
  }

  private listed(name: string, repository: readonly string[]): ListedModel {
    return {
      name,
      localize: () => readModelFolder(join(this.location, name), name),
      prune: async () => undefined,
      modelRelative: (message: string) => modelRelativeMessage(message, name, childForms(repository, name)),
    };
  }

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
}
