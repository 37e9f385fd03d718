import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { RepositoryError } from './repository-error.ts';

/** A model as it sits in a Triton-layout repository: `<repo>/<model>/config.pbtxt`, `<repo>/<model>/<version>/`. */
export interface ModelFolder {
  readonly name: string;
  readonly dir: string;
  /** config.pbtxt text, or undefined when the folder has none (auto-complete may supply it). */
  readonly configText: string | undefined;
  /** config.pbtxt as errors name it: model-relative (`resnet/config.pbtxt`), never the server's path. */
  readonly configPath: string;
  /** Numeric version subfolders, ascending. */
  readonly versions: readonly number[];
}

/** Refuses a model name that is not one folder of a repository (a cache folder is named after it). */
export function checkModelName(name: string): void {
  if (name === '' || name.includes('/') || name === '.' || name === '..' || name.startsWith('.')) {
    throw new RepositoryError('INVALID', `'${name}' is not a model name`);
  }
}

/** A version folder's name: digits that make a safe integer (Triton's `<model>/<version>/`). */
export function isVersionName(name: string): boolean {
  return /^[0-9]+$/.test(name) && Number.isSafeInteger(Number(name));
}

/** The version folders of a model folder, ascending; none when the folder is missing. */
export async function listVersionFolders(dir: string): Promise<number[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  return entries
    .filter((e) => e.isDirectory() && isVersionName(e.name))
    .map((e) => Number(e.name))
    .sort((a, b) => a - b);
}

export async function readModelFolder(dir: string, name: string): Promise<ModelFolder> {
  await stat(dir); // a missing model folder is an error here, not an empty model
  const versions = await listVersionFolders(dir);
  const configText = await readFile(join(dir, 'config.pbtxt'), 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  return { name, dir, configText, configPath: `${name}/config.pbtxt`, versions };
}

export async function fileExists(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isFile(),
    () => false,
  );
}
