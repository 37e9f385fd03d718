import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { serializeModel, type IModelProto } from '@batchwise/modelgen';

export interface RepositoryModel {
  readonly name: string;
  /** Written into each version folder; omitted for a model without a model file (an ensemble). */
  readonly model?: IModelProto;
  /** config.pbtxt text; omitted for auto-complete. */
  readonly config?: string;
  /** @default [1] */
  readonly versions?: readonly number[];
  /** @default 'model.onnx' */
  readonly fileName?: string;
  /** Further files in the model folder (e.g. a label file, or `1/model.mjs`), by path. */
  readonly files?: Readonly<Record<string, string | Uint8Array>>;
}

/** A throw-away Triton-layout repository of generated models. */
export async function makeRepository(models: readonly RepositoryModel[]): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'batchwise-repo-'));
  for (const m of models) {
    const bytes = m.model && serializeModel(m.model);
    await mkdir(join(dir, m.name), { recursive: true });
    if (m.config !== undefined) await writeFile(join(dir, m.name, 'config.pbtxt'), m.config);
    for (const [file, text] of Object.entries(m.files ?? {})) {
      await mkdir(dirname(join(dir, m.name, file)), { recursive: true });
      await writeFile(join(dir, m.name, file), text);
    }
    for (const v of m.versions ?? [1]) {
      await mkdir(join(dir, m.name, String(v)), { recursive: true });
      if (bytes) await writeFile(join(dir, m.name, String(v), m.fileName ?? 'model.onnx'), bytes);
    }
  }
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

export const EXAMPLES = new URL('../../examples/model_repository', import.meta.url).pathname;

/** config.pbtxt of `identity('FP32', [4])` (INPUT0 to OUTPUT0, batching up to 8), with `extra` fields. */
export const identityConfig = (name: string, extra = '') => `
name: "${name}"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
${extra}`;
