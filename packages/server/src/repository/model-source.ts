import { scanRepository, type ModelFolder } from './model-folder.ts';

/**
 * Where models come from, as the model manager sees it: local folders in Triton layout.
 * Remote repositories (s3://) implement this by localizing into a cache folder first.
 */
export interface ModelSource {
  readonly location: string;
  /** One look at the repository: every model folder, with its versions present locally. */
  listModels(): Promise<ModelFolder[]>;
}

export function folderSource(root: string): ModelSource {
  return { location: root, listModels: () => scanRepository(root) };
}
