import { stat } from 'node:fs/promises';
import { join } from 'node:path';

/** The model file names tried, in order, when the config has no default_model_filename. */
export const JS_MODEL_FILES = ['model.mjs', 'model.js'] as const;

/** The version folder's model file: default_model_filename, else model.mjs, else model.js; undefined when none exists. */
export async function findJsModelFile(versionDir: string, defaultModelFilename: string | undefined): Promise<string | undefined> {
  const names = defaultModelFilename ? [defaultModelFilename] : JS_MODEL_FILES;
  for (const name of names) {
    const path = join(versionDir, name);
    if (
      await stat(path).then(
        (s) => s.isFile(),
        () => false,
      )
    )
      return path;
  }
  return undefined;
}
