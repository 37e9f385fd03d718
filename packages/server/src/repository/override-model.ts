import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Errors } from '../errors/errors.ts';
import { readModelFolder } from './model-folder.ts';
import { fileErrorText, folderForms, modelRelativeMessage } from './model-paths.ts';
import type { ListedModel } from './model-source.ts';

/** A model made of a load request's file overrides, in a folder of its own that the caller removes. */
export interface OverrideModel {
  readonly listed: ListedModel;
  readonly dir: string;
}

/**
 * Writes a load request's file overrides and its config into a new temporary folder in Triton
 * layout, as Triton's model repository manager localizes them: the model loads from that folder
 * alone, none of its repository files included. `files` are paths inside the model folder
 * (`1/model.onnx`), already checked to stay inside it.
 */
export async function writeOverrideModel(name: string, configText: string, files: ReadonlyMap<string, Uint8Array>): Promise<OverrideModel> {
  // What the file system refuses (a name too long, a full disk) fails in Triton's words, without our temporary folder.
  const pollFailed = (what: string, error: unknown) =>
    Errors.modelRepositoryPollFailed(name, `cannot write ${what}: ${fileErrorText(error)}`);
  const dir = await mkdtemp(join(tmpdir(), 'batchwise-override-')).catch((error: unknown) => {
    throw pollFailed('a folder for the file overrides', error);
  });
  try {
    for (const [path, bytes] of files) {
      const target = join(dir, path);
      try {
        await mkdir(dirname(target), { recursive: true });
        await writeFile(target, bytes);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'EEXIST' || code === 'ENOTDIR' || code === 'EISDIR') {
          throw Errors.invalidArg(`Invalid file parameter 'file:${path}', directory has been created as a file`);
        }
        throw pollFailed(`the file of parameter 'file:${path}'`, error);
      }
    }
    // The config parameter is the model's config, whatever a file override named config.pbtxt held.
    await writeFile(join(dir, 'config.pbtxt'), configText).catch((error: unknown) => {
      throw pollFailed('config.pbtxt', error);
    });
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const forms = await folderForms(dir);
  return {
    dir,
    listed: {
      name,
      localize: () => readModelFolder(dir, name),
      prune: async () => undefined,
      modelRelative: (message) => modelRelativeMessage(message, name, forms),
    },
  };
}
