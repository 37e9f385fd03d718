import { realpath } from 'node:fs/promises';
import { isAbsolute, join, posix, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { configPaths, type ConfigPath } from '../config/index.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { Errors, type InferenceServerError } from '../errors/errors.ts';

/**
 * A path a config names (config/config-paths.ts), resolved inside the model's folder: `under`
 * is the folder of the model it is relative to ('1', '' for the model folder, 'warmup').
 * Normalised, and with its links followed where it exists, it must name something inside
 * `modelDir`, or the load fails naming `what` (the model and the field) and the path as
 * written, never a path of the server. Resolves with the path to open, links followed.
 */
export async function resolveInModelFolder(modelDir: string, under: string, path: string, what: string): Promise<string> {
  const root = resolve(modelDir);
  const lexical = resolve(root, under, path);
  if (!isInside(lexical, root)) throw outsideModelFolder(what, path);
  // A path that does not exist opens nothing; one that does is judged by where its links lead.
  const real = await realpath(lexical).catch(() => undefined);
  if (real === undefined) return lexical;
  if (!isInside(real, await realpath(root).catch(() => root))) throw linkOutOfModelFolder(what, path);
  return real;
}

/**
 * Every path a config names stays inside the model's folder once normalised (links are judged
 * at load, by resolveInModelFolder): a load request's config is refused with this before
 * anything is read or the model's state is touched. `what` names the model.
 */
export function checkConfigPathsLexically(config: ModelConfig, what: string): void {
  const root = posix.resolve('/model');
  for (const { field, path, under } of configPaths(config)) {
    // Any version folder is one level down: '1' stands for all of them.
    if (!isInside(posix.resolve(root, folderOf(under, 1), path), root)) throw outsideModelFolder(`${what}: ${field}`, path);
  }
}

/** The folder of the model (relative to it) that a config path of `version` is read from, as Triton reads it. */
export function folderOf(under: ConfigPath['under'], version: number): string {
  return under === 'version' ? String(version) : under === 'model' ? '' : under;
}

function outsideModelFolder(what: string, path: string): InferenceServerError {
  return Errors.invalidArg(`${what} '${path}' must name a file inside the model's folder`);
}

/** The name stays inside, but a symbolic link on its way leads out: said as such, with the fix. */
function linkOutOfModelFolder(what: string, path: string): InferenceServerError {
  return Errors.invalidArg(
    `${what} '${path}' must name a file inside the model's folder: a symbolic link on its way leads out of it (copy the file into the model's folder, or use a hard link)`,
  );
}

function isInside(path: string, root: string): boolean {
  return path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/**
 * What went wrong with a file, without the server path that Node's message carries
 * (`ENOENT: no such file or directory, open '/srv/...'` is `no such file or directory (ENOENT)`).
 */
export function fileErrorText(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  if (!(e instanceof Error)) return String(error);
  if (typeof e.code !== 'string') return e.message;
  return `${e.message.replace(/^[A-Z0-9_]+: /, '').replace(/, [a-z_]+ '[\s\S]*$/, '')} (${e.code})`;
}

/**
 * Writes a message about a model with the places its files are read from (its repository
 * folder, the local cache of an S3 repository, a file override folder, its S3 location) as the
 * model's name, so that what the API answers names model-relative paths only:
 * `/srv/models/resnet/1/model.onnx` (or its `file://` URL) becomes `resnet/1/model.onnx`.
 * Third-party messages (ONNX Runtime's, Node's module loader's) go through it too.
 */
export function modelRelativeMessage(message: string, name: string, roots: readonly string[]): string {
  const forms = roots.filter((r) => r !== '').flatMap((r) => (isAbsolute(r) ? [pathToFileURL(r).href, r] : [r]));
  let out = message;
  for (const form of [...new Set(forms)].sort((a, b) => b.length - a.length)) out = out.split(form).join(name);
  return out;
}

/** The forms a message may show of a folder (a repository, a cache, a model's): as given, resolved, and with its links followed. */
export async function folderForms(dir: string): Promise<string[]> {
  return [...new Set([dir, resolve(dir), await realpath(dir).catch(() => resolve(dir))])];
}

/** The forms of the folder `name` inside a folder whose forms are `parents`. */
export function childForms(parents: readonly string[], name: string): string[] {
  return parents.map((parent) => join(parent, name));
}
