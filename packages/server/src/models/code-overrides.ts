import type { Backend } from '../backends/backend.ts';
import { isEnsembleConfig } from '../config/index.ts';
import type { ModelConfig } from '../config/model-config.ts';

/** The serve flag that lets load requests bring code: the files of JavaScript models, node_modules, a switch to js. */
export const ALLOW_CODE_OVERRIDES_FLAG = '--allow-code-overrides';

/** Whether a config's model is code the server runs: its backend's model files are code (backend js). */
export function runsModelCode(config: ModelConfig | undefined, backends: readonly Backend[]): boolean {
  if (!config || isEnsembleConfig(config)) return false;
  const name = config.backend || 'onnxruntime';
  return backends.some((b) => b.name === name && b.runsModelCode === true);
}

/**
 * What in a load request's file overrides would be code the server runs, or undefined: a file in
 * a node_modules folder (a package), or any file of a model whose files are code. ONNX files
 * and the data files of an ONNX model are not code: Triton users upload them as before.
 */
export function codeInFileOverrides(
  override: ModelConfig,
  files: ReadonlyMap<string, unknown>,
  backends: readonly Backend[],
): string | undefined {
  const packaged = [...files.keys()].find((path) => path.split('/').includes('node_modules'));
  if (packaged !== undefined) return `the file override 'file:${packaged}' is in a node_modules folder, a package of code`;
  if (runsModelCode(override, backends)) return `its file overrides would be the code of a backend "${override.backend}" model`;
  return undefined;
}

/**
 * What a config override alone (the model's files from the repository) would turn into code, or
 * undefined: a config that makes a model whose repository config does not run code run its
 * files as code (switches it to backend js). The repository's config is read only then.
 */
export async function codeInConfigOverride(
  override: ModelConfig,
  repositoryConfig: () => Promise<ModelConfig | undefined>,
  backends: readonly Backend[],
): Promise<string | undefined> {
  if (!runsModelCode(override, backends) || runsModelCode(await repositoryConfig(), backends)) return undefined;
  return `its config override would switch the model to backend "${override.backend}", running its files as code`;
}
