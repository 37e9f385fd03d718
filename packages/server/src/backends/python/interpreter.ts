import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import type { ModelConfig } from '../../config/model-config.ts';
import { Errors } from '../../errors/errors.ts';

/** Triton's parameter naming a model's Python environment: a folder with bin/activate, or a .tar.gz of one (conda-pack). */
export const EXECUTION_ENV_PATH = 'EXECUTION_ENV_PATH';

export interface Interpreter {
  readonly python: string;
  readonly env: NodeJS.ProcessEnv;
}

/**
 * The host's interpreter: $BATCHWISE_PYTHON, else Debian's /usr/bin/python3 (where apt's numpy is),
 * else the first python3 on PATH.
 */
export function hostPython(): string {
  return process.env['BATCHWISE_PYTHON'] || (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
}

/** The interpreter a model runs on: its EXECUTION_ENV_PATH's, unpacked once when packed, or the host's. */
export async function interpreterFor(config: ModelConfig, modelDir: string, logger: Logger): Promise<Interpreter> {
  const given = config.parameters?.[EXECUTION_ENV_PATH]?.string_value;
  if (!given) return { python: hostPython(), env: process.env };
  const path = given.replaceAll('$$TRITON_MODEL_DIRECTORY', modelDir);
  const folder = /\.(tar\.gz|tgz)$/.test(path) ? await unpacked(path, config.name, logger) : path;
  const python = join(folder, 'bin', 'python3');
  if (!existsSync(join(folder, 'bin', 'activate')) && !existsSync(python)) {
    throw Errors.invalidArg(
      `model '${config.name}': parameter ${EXECUTION_ENV_PATH} '${given}' is not a Python environment (no bin/activate or bin/python3 in ${folder})`,
    );
  }
  // What `source bin/activate` sets, without a shell.
  return {
    python: existsSync(python) ? python : hostPython(),
    env: { ...process.env, VIRTUAL_ENV: folder, PATH: `${join(folder, 'bin')}:${process.env['PATH'] ?? ''}` },
  };
}

/** A packed environment, unpacked once per archive (its path, size and time) under the temporary folder. */
async function unpacked(archive: string, model: string, logger: Logger): Promise<string> {
  let info;
  try {
    info = await stat(archive);
  } catch {
    throw Errors.invalidArg(`model '${model}': parameter ${EXECUTION_ENV_PATH} names '${archive}', which does not exist`);
  }
  const key = createHash('sha256').update(`${archive}\0${info.size}\0${info.mtimeMs}`).digest('hex').slice(0, 16);
  const folder = join(tmpdir(), 'batchwise-python-envs', `${basename(archive).replace(/\.(tar\.gz|tgz)$/, '')}-${key}`);
  if (existsSync(folder)) return folder;
  const partial = `${folder}.partial-${process.pid}`;
  await mkdir(partial, { recursive: true });
  logger.info({ model, archive, folder }, "unpacking the model's Python environment (EXECUTION_ENV_PATH)");
  try {
    await promisify(execFile)('tar', ['-xzf', archive, '-C', partial]);
    await rename(partial, folder);
  } catch (error) {
    await rm(partial, { recursive: true, force: true });
    if (existsSync(folder)) return folder;
    throw Errors.invalidArg(`model '${model}': cannot unpack ${EXECUTION_ENV_PATH} '${archive}': ${(error as Error).message}`);
  }
  return folder;
}
