import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as Esbuild from 'esbuild';

/**
 * Worker threads of a server that runs from its TypeScript sources (`pnpm start`, tsx, vitest).
 * Node cannot start a thread on worker.ts by itself, and registering tsx in every thread gave each
 * model instance a loader thread and an esbuild process of its own: with 20 instances that was 13 s
 * of a cold `pnpm start` on two cores and still seconds warm (issue 35). Instead the main thread
 * bundles a worker's entry once, in one esbuild run, into plain JavaScript that every thread of it
 * starts from, as threads of the compiled server start from dist.
 *
 * The bundle is written to a folder named by its content, under the server package (so that the npm
 * packages it leaves as imports, onnxruntime-node, resolve as they do from the sources): unchanged
 * sources find their folder and write nothing, a changed source gets a new folder, and a running
 * server keeps the one it started with. Workspace packages are TypeScript too, so they are bundled
 * in; `@batchwise/backend` is also a module of its own at node_modules/@batchwise/backend inside the
 * folder, where the worker's `import.meta.resolve('@batchwise/backend')` finds it, so that model code
 * importing it shares the instance the worker uses (js/resolve-hook.ts).
 */

const requireHere = createRequire(import.meta.url);
const SERVER_PACKAGE_JSON = new URL('../../package.json', import.meta.url);
/** Where bundles live by default: the package's node_modules/.cache, thrown away with node_modules. */
export const SOURCE_WORKER_CACHE = new URL('../../node_modules/.cache/batchwise-workers/', import.meta.url);

const BACKEND_PACKAGE = '@batchwise/backend';
const BACKEND_MODULE = `node_modules/${BACKEND_PACKAGE}/index`;
const ENTRY = 'worker';

/** `@batchwise/*` dependencies of the server, each mapped to its TypeScript entry. */
function workspaceSources(): Record<string, string> {
  const { dependencies = {} } = JSON.parse(readFileSync(SERVER_PACKAGE_JSON, 'utf8')) as { dependencies?: Record<string, string> };
  const names = Object.keys(dependencies).filter((name) => name.startsWith('@batchwise/'));
  return Object.fromEntries(names.map((name) => [name, requireHere.resolve(name)]));
}

interface BundleFile {
  /** Relative to the bundle's folder. */
  readonly path: string;
  readonly contents: Uint8Array;
}

/** Bundles `entry` (a worker.ts) and returns the URL of the JavaScript file a thread starts from. */
export function bundleSourceWorker(entry: URL, cacheDir: URL = SOURCE_WORKER_CACHE): URL {
  const esbuild = requireHere('esbuild') as typeof Esbuild;
  const workspace = workspaceSources();
  // Output paths are made relative to this folder; it has the depth of the final one, so the
  // relative source paths in the inline source maps stay right.
  const placeholder = fileURLToPath(new URL('bundle/', cacheDir));
  const result = esbuild.buildSync({
    entryPoints: { [ENTRY]: fileURLToPath(entry), [BACKEND_MODULE]: workspace[BACKEND_PACKAGE]! },
    outdir: placeholder,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    alias: workspace,
    outExtension: { '.js': '.mjs' },
    sourcemap: 'inline',
    sourcesContent: false,
    write: false,
    logLevel: 'silent',
  });
  const files: BundleFile[] = [
    ...result.outputFiles.map((file) => ({ path: relative(placeholder, file.path), contents: file.contents })),
    {
      path: `node_modules/${BACKEND_PACKAGE}/package.json`,
      contents: Buffer.from(JSON.stringify({ name: BACKEND_PACKAGE, type: 'module', exports: './index.mjs' })),
    },
  ];
  const dir = join(fileURLToPath(cacheDir), `${basename(dirname(fileURLToPath(entry)))}-${contentHash(files)}`);
  if (!existsSync(dir)) writeOnce(dir, files);
  return pathToFileURL(join(dir, `${ENTRY}.mjs`));
}

function contentHash(files: readonly BundleFile[]): string {
  const hash = createHash('sha256');
  for (const file of [...files].sort((a, b) => (a.path < b.path ? -1 : 1)))
    hash.update(`${file.path}\0`).update(file.contents).update('\0');
  return hash.digest('hex').slice(0, 16);
}

/** Writes the folder whole or not at all: servers and test processes starting together build the same one. */
function writeOnce(dir: string, files: readonly BundleFile[]): void {
  const staging = `${dir}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
  for (const file of files) {
    mkdirSync(dirname(join(staging, file.path)), { recursive: true });
    writeFileSync(join(staging, file.path), file.contents);
  }
  try {
    renameSync(staging, dir);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(dir)) throw error;
  }
}

/** Node flags that load code before the entry, and a value naming tsx's package or a file in it. */
const PRELOAD_FLAGS = new Set(['--import', '--require', '-r', '--loader', '--experimental-loader']);
const TSX = /^tsx(\/|$)|[/\\]tsx[/\\]/;

/**
 * The process's Node flags less tsx's loader (`--import tsx`, or the `--require` and `--import` the
 * tsx command adds), for threads started from a bundle: they need no TypeScript loader, and tsx's in
 * each thread sends every import of the thread through its hooks (about a second of CPU per thread).
 * Undefined when there is none to drop: the thread inherits the flags as usual.
 */
export function execArgvWithoutTsx(execArgv: readonly string[] = process.execArgv): string[] | undefined {
  const kept: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    const equals = arg.indexOf('=');
    const flag = equals < 0 ? arg : arg.slice(0, equals);
    const value = equals < 0 ? execArgv[i + 1] : arg.slice(equals + 1);
    if (PRELOAD_FLAGS.has(flag) && value !== undefined && TSX.test(value)) {
      if (equals < 0) i++;
      continue;
    }
    kept.push(arg);
  }
  return kept.length < execArgv.length ? kept : undefined;
}

const bundled = new Map<string, URL>();

/** The bundle of `entry` this process starts its threads from: built on the first call, then reused. */
export function sourceWorkerUrl(entry: URL): URL {
  let url = bundled.get(entry.href);
  if (!url) {
    url = bundleSourceWorker(entry);
    bundled.set(entry.href, url);
  }
  return url;
}
