import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { bundleSourceWorker, execArgvWithoutTsx } from './source-worker-bundle.ts';

/** A worker entry in TypeScript that imports a file of its own and @batchwise/backend, as worker.ts does. */
const ENTRY = `
import { parentPort } from 'node:worker_threads';
import { ModelCallError } from '@batchwise/backend';
import { answer } from './answer.ts';

// Model code resolves '@batchwise/backend' from the worker's own resolution (js/resolve-hook.ts).
const modelsCopy: { ModelCallError: unknown } = await import(import.meta.resolve('@batchwise/backend'));
parentPort!.postMessage({ answer: answer(), sameBackend: modelsCopy.ModelCallError === ModelCallError });
`;
const answerFile = (value: number) => `export function answer(): number {\n  return ${value} as number;\n}\n`;

function run(url: URL): Promise<{ answer: number; sameBackend: boolean }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(url);
    worker.once('message', (message) => void worker.terminate().then(() => resolve(message)));
    worker.once('error', reject);
  });
}

describe('the bundle a source-run server starts its worker threads from', () => {
  let dir: string;
  let cache: URL;
  let entry: URL;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-worker-bundle-'));
    cache = pathToFileURL(join(dir, 'cache/'));
    await writeFile(join(dir, 'worker.ts'), ENTRY);
    await writeFile(join(dir, 'answer.ts'), answerFile(1));
    entry = pathToFileURL(join(dir, 'worker.ts'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it("runs the TypeScript entry with its imports, and model code gets the worker's own @batchwise/backend", async () => {
    expect(await run(bundleSourceWorker(entry, cache))).toEqual({ answer: 1, sameBackend: true });
  });

  it('reuses the bundle of unchanged sources without writing it again', async () => {
    const first = bundleSourceWorker(entry, cache);
    const written = await stat(first);
    const second = bundleSourceWorker(entry, cache);
    expect(second.href).toBe(first.href);
    expect((await stat(second)).mtimeMs).toBe(written.mtimeMs);
    expect(await readdir(cache)).toHaveLength(1);
  });

  it('builds a new bundle when an imported file changes, and leaves the old one to the threads that use it', async () => {
    const before = bundleSourceWorker(entry, cache);
    await writeFile(join(dir, 'answer.ts'), answerFile(2));
    const after = bundleSourceWorker(entry, cache);
    expect(after.href).not.toBe(before.href);
    expect((await run(after)).answer).toBe(2);
    expect((await run(before)).answer).toBe(1);
  });

  it('refuses sources that do not compile, naming the file and line', async () => {
    await writeFile(join(dir, 'answer.ts'), 'export function answer(): number {\n  return = 1;\n}\n');
    expect(() => bundleSourceWorker(entry, cache)).toThrow(/answer\.ts:2:/);
  });
});

describe("the Node flags of a source-run server's worker threads", () => {
  it("drop tsx's loader, in each form it takes, and keep every other flag", () => {
    expect(execArgvWithoutTsx(['--import', 'tsx'])).toEqual([]);
    expect(execArgvWithoutTsx(['--import=tsx', '--conditions=batchwise-dist'])).toEqual(['--conditions=batchwise-dist']);
    // What the tsx command gives the node it starts.
    const tsxCommand = [
      '--require',
      '/repo/node_modules/.pnpm/tsx@4.23.15/node_modules/tsx/dist/preflight.cjs',
      '--import',
      'file:///repo/node_modules/.pnpm/tsx@4.23.15/node_modules/tsx/dist/loader.mjs',
      '--enable-source-maps',
    ];
    expect(execArgvWithoutTsx(tsxCommand)).toEqual(['--enable-source-maps']);
  });

  it('leave the flags to be inherited when there is no tsx among them', () => {
    expect(execArgvWithoutTsx(['--import', './tsxlike.mjs', '--require', '/opt/tsx-tools/x.cjs'])).toBeUndefined();
    expect(execArgvWithoutTsx([])).toBeUndefined();
  });
});
