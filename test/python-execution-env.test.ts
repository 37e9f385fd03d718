/**
 * EXECUTION_ENV_PATH (Triton's per-model Python environment): a folder with bin/activate (here a venv
 * inside the model's folder, named through $$TRITON_MODEL_DIRECTORY) and a packed .tar.gz of one,
 * unpacked once; a path that is no environment, or one without numpy, fails the load saying why.
 */
import { execFile } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { HttpClient } from '@batchwise/client';
import { makeRepository } from './support/repository.ts';
import { PREFIX_PY, prefixConfig } from './support/python-models.ts';
import { startTestServer } from './support/server.ts';

const run = promisify(execFile);
let repo: Awaited<ReturnType<typeof makeRepository>>;
let server: Awaited<ReturnType<typeof startTestServer>>;
let http: HttpClient;

beforeAll(async () => {
  repo = await makeRepository([
    { name: 'in_folder', config: prefixConfig('in_folder', '$$TRITON_MODEL_DIRECTORY/env'), files: { '1/model.py': PREFIX_PY } },
    { name: 'packed', config: prefixConfig('packed', '$$TRITON_MODEL_DIRECTORY/env.tar.gz'), files: { '1/model.py': PREFIX_PY } },
    { name: 'not_an_env', config: prefixConfig('not_an_env', '$$TRITON_MODEL_DIRECTORY/1'), files: { '1/model.py': PREFIX_PY } },
    { name: 'no_numpy', config: prefixConfig('no_numpy', '$$TRITON_MODEL_DIRECTORY/env'), files: { '1/model.py': PREFIX_PY } },
  ]);
  // A venv over the host's numpy, as `python3 -m venv` makes one (conda-pack archives unpack the same way).
  for (const model of ['in_folder', 'packed']) {
    await run('/usr/bin/python3', ['-m', 'venv', '--without-pip', '--system-site-packages', join(repo.dir, model, 'env')]);
  }
  // An environment without the host's packages: no numpy.
  await run('/usr/bin/python3', ['-m', 'venv', '--without-pip', join(repo.dir, 'no_numpy', 'env')]);
  await run('tar', ['-czf', join(repo.dir, 'packed', 'env.tar.gz'), '-C', join(repo.dir, 'packed', 'env'), '.']);
  await run('rm', ['-rf', join(repo.dir, 'packed', 'env')]);
  await mkdir(join(repo.dir, 'not_an_env', '1'), { recursive: true });
  server = await startTestServer([repo.dir], { modelControlMode: 'explicit' });
  http = new HttpClient({ url: server.url });
}, 120_000);

afterAll(async () => {
  await http?.close();
  await server?.close();
  await repo?.remove();
});

const prefixOf = async (model: string) => {
  const answer = await http.infer({ model, inputs: [{ name: 'X', datatype: 'FP32', shape: [1], data: [0] }] });
  return Buffer.from((answer.outputs[0]!.data as Uint8Array[])[0]!).toString();
};

it("runs the model on a folder's environment, $$TRITON_MODEL_DIRECTORY expanded", async () => {
  await http.loadModel('in_folder');
  expect(await prefixOf('in_folder')).toBe(join(repo.dir, 'in_folder', 'env'));
});

it('unpacks a packed environment once and runs the model on it', async () => {
  await http.loadModel('packed');
  const prefix = await prefixOf('packed');
  expect(prefix).toMatch(/batchwise-python-envs\/env-[0-9a-f]{16}$/);
  await http.unloadModel('packed');
  await http.loadModel('packed');
  expect(await prefixOf('packed')).toBe(prefix);
});

it('fails the load of a model whose EXECUTION_ENV_PATH is no environment, saying why', async () => {
  const error = await http.loadModel('not_an_env').then(
    () => undefined,
    (e: Error) => e,
  );
  expect(error?.message).toMatch(/parameter EXECUTION_ENV_PATH '\$\$TRITON_MODEL_DIRECTORY\/1' is not a Python environment/);
});

it('fails the load of a model whose interpreter has no numpy, saying what to install', async () => {
  const error = await http.loadModel('no_numpy').then(
    () => undefined,
    (e: Error) => e,
  );
  expect(error?.message).toMatch(/numpy cannot be imported by .*no_numpy\/env\/bin\/python3.*apt-get install python3-numpy/);
});
