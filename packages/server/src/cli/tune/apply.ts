import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseRepositoryLocation } from '../../repository/repository-url.ts';
import { REPORT_FILES } from './report.ts';
import type { TuneResult } from './tune.ts';

/** What `--apply` did, for the user. */
export interface ApplyOutcome {
  readonly text: string;
}

const quote = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/**
 * Local repository: writes the recommended config over `<repo>/<model>/config.pbtxt`, after
 * keeping the current one as `current.config.pbtxt` in the output folder; refuses when the file
 * changed since tune read it. S3: writes nothing there; copies the served artifact next to the
 * report and returns the `batchwise models promote` command that ships both as a new version
 * (the repository's history and rollback stay in one place).
 */
export async function applyRecommendation(result: TuneResult, outDir: string): Promise<ApplyOutcome> {
  if (result.recommendedConfigText === undefined) throw new Error('nothing to apply: no configuration met the objective');
  const location = parseRepositoryLocation(result.repository);
  const recommendedPath = join(outDir, REPORT_FILES.config);
  if (location.kind === 's3') {
    if (!result.modelFile) throw new Error(`'${result.model}' has no version folder to promote from`);
    const artifact = join(outDir, 'model.onnx');
    await copyFile(result.modelFile, artifact);
    const command = [
      'pnpm batchwise models promote',
      `--model-repository ${quote(result.repository)}`,
      `--model ${quote(result.model)}`,
      `--file ${quote(artifact)}`,
      `--config ${quote(recommendedPath)}`,
      `--message ${quote(`batchwise tune: ${result.recommendation!.point.candidate}`)}`,
    ].join(' ');
    return {
      text: `${result.repository} is on S3: tune does not write there. Ship the recommended config as a new version with:\n\n  ${command}\n`,
    };
  }
  if (result.recommendedConfigText === result.currentConfigText)
    return { text: 'the current config is the recommended one: nothing to write\n' };
  const target = join(location.path, result.model, 'config.pbtxt');
  const now = await readFile(target, 'utf8').catch(() => undefined);
  if (now !== undefined && now !== result.currentConfigText) {
    throw new Error(`${target} changed since tune read it; not overwriting it (the recommendation is in ${recommendedPath})`);
  }
  const backup = join(outDir, 'current.config.pbtxt');
  await writeFile(backup, result.currentConfigText);
  await writeFile(target, result.recommendedConfigText);
  return { text: `wrote ${target} (the previous config is kept in ${backup})\n` };
}
