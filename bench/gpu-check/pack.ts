/**
 * `pnpm gpu:pack [--out DIR] [--smoke]`: packs what the GPU check needs into one folder (default
 * `.gpu-pack/`, ignored) to send to a GPU host that has an NVIDIA driver and no Node: Node's binary
 * and `libonnxruntime.so.1` compressed with xz, the compiled server bundled with esbuild (its
 * ONNX Runtime and JavaScript backend workers are files of their own, loaded by path), the check
 * (check.ts, bundled, with the PyTorch model.py it writes), the Python backend's stub, onnxruntime-node's
 * binding, Debian's Vulkan loader, the third-party ONNX models (third-party.ts) and run.sh, the one
 * command that runs it there. Fails when the pack is over 60 MiB (64 MiB travel with a command).
 *
 * `--smoke` (the suite's dry run) links Node and libonnxruntime.so.1 instead of compressing them
 * (xz takes minutes on two cores) and brings the Vulkan loader and the third-party models only
 * when they are cached.
 */
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { REQUIRE_SHIM } from '@batchwise/modelgen/bundle';
import { packThirdPartyModels } from './third-party.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HERE = fileURLToPath(new URL('./', import.meta.url));
export const PACK_LIMIT_BYTES = 60 * 2 ** 20;
export const DEFAULT_PACK_DIR = join(ROOT, '.gpu-pack');
/** Where the downloaded Vulkan loader is kept between packs (ignored). */
const DEB_CACHE = join(ROOT, '.cache', 'gpu-pack');
const SERVER_DIST = join(ROOT, 'packages/server/dist');

export interface PackOptions {
  readonly out: string;
  readonly smoke: boolean;
  readonly log: (line: string) => void;
}

export interface PackedFile {
  readonly path: string;
  readonly bytes: number;
}

/**
 * Each backend starts its worker from `worker.js` beside its own module (`new URL('./', import.meta.url)`);
 * bundled, that module is main.js, so each points at its worker's folder beside main.js instead.
 */
const BACKEND_DIRS: Readonly<Record<string, string>> = {
  'backends/onnxruntime/onnxruntime-backend.js': './backends/onnxruntime/',
  'backends/js/js-backend.js': './backends/js/',
};

/**
 * The server's own child servers (`batchwise tune` runs each candidate in one) start the compiled CLI
 * at dist/cli/main.js of the server package; bundled, that CLI is main.js itself.
 */
const COMPILED_CLI = "new URL('dist/cli/main.js', SERVER_PACKAGE)";

const workerDirs: Plugin = {
  name: 'batchwise-worker-dirs',
  setup(b) {
    b.onLoad({ filter: /cli\/server-process\.js$/ }, (args) => {
      if (relative(SERVER_DIST, args.path) !== 'cli/server-process.js') return undefined;
      const source = readFileSync(args.path, 'utf8');
      if (source.split(COMPILED_CLI).length !== 2)
        throw new Error(
          `cli/server-process.js: expected one ${COMPILED_CLI} (the CLI child servers run); the GPU pack must be told where it moved`,
        );
      return { contents: source.replace(COMPILED_CLI, "new URL('./main.js', import.meta.url)"), loader: 'js' };
    });
    b.onLoad({ filter: /backends\/(onnxruntime\/onnxruntime-backend|js\/js-backend)\.js$/ }, (args) => {
      const key = relative(SERVER_DIST, args.path);
      const dir = BACKEND_DIRS[key];
      if (!dir) return undefined;
      const source = readFileSync(args.path, 'utf8');
      const own = "new URL('./', import.meta.url)";
      if (source.split(own).length !== 2)
        throw new Error(`${key}: expected one ${own} (its worker's folder); the GPU pack must be told where it moved`);
      return { contents: source.replace(own, `new URL('${dir}', import.meta.url)`), loader: 'js' };
    });
  },
};

/** The server (compiled dist), its two workers and the check, as ES modules under `app/`. */
async function bundle(app: string): Promise<void> {
  await build({
    entryPoints: [
      { in: join(SERVER_DIST, 'cli/program.js'), out: 'server/main' },
      { in: join(SERVER_DIST, 'backends/onnxruntime/worker.js'), out: 'server/backends/onnxruntime/worker' },
      { in: join(SERVER_DIST, 'backends/js/worker.js'), out: 'server/backends/js/worker' },
      { in: join(HERE, 'check.ts'), out: 'check/check' },
    ],
    outdir: app,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['batchwise-dist'],
    // The native binding is loaded by path; JavaScript models must share the server's one copy of the backend API.
    external: ['onnxruntime-node', '@batchwise/backend'],
    banner: { js: REQUIRE_SHIM },
    plugins: [workerDirs],
    logLevel: 'warning',
  });
  await build({
    entryPoints: [join(ROOT, 'packages/backend/dist/index.js')],
    outfile: join(app, 'node_modules/@batchwise/backend/index.js'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'warning',
  });
  writeFileSync(
    join(app, 'node_modules/@batchwise/backend/package.json'),
    JSON.stringify({ name: '@batchwise/backend', type: 'module', main: 'index.js' }),
  );
  writeFileSync(join(app, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  // The protocol package reads its .proto files from '../proto/' beside the module: main.js is in app/server.
  cpSync(join(ROOT, 'packages/protocol/proto'), join(app, 'proto'), { recursive: true });
  // The Python backend runs stub/stub.py beside its module (stub-process.ts): main.js is in app/server.
  cpSync(join(ROOT, 'packages/server/src/backends/python/stub'), join(app, 'server/stub'), {
    recursive: true,
    filter: (p) => !p.includes('__pycache__'),
  });
  // The check's PyTorch model (torch-model.ts reads it beside check.js).
  copyFileSync(join(HERE, 'torch_mlp.py'), join(app, 'check/torch_mlp.py'));
}

/** The folder of package `name` as `from` resolves it. */
function packageRoot(from: string, name: string): string {
  let dir = dirname(realpathSync(createRequire(from).resolve(name)));
  while (
    !existsSync(join(dir, 'package.json')) ||
    (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string }).name !== name
  ) {
    if (dirname(dir) === dir) throw new Error(`no package.json of ${name} above its entry point`);
    dir = dirname(dir);
  }
  return dir;
}

/** onnxruntime-node's JavaScript and binding (its libonnxruntime.so.1 travels compressed) and onnxruntime-common. */
function copyOnnxRuntime(app: string): string {
  const ortDir = packageRoot(join(ROOT, 'packages/server/package.json'), 'onnxruntime-node');
  const commonDir = packageRoot(join(ortDir, 'package.json'), 'onnxruntime-common');
  const ortOut = join(app, 'node_modules/onnxruntime-node');
  const bin = 'bin/napi-v6/linux/x64';
  mkdirSync(join(ortOut, bin), { recursive: true });
  copyFileSync(join(ortDir, 'package.json'), join(ortOut, 'package.json'));
  cpSync(join(ortDir, 'dist'), join(ortOut, 'dist'), { recursive: true });
  copyFileSync(join(ortDir, bin, 'onnxruntime_binding.node'), join(ortOut, bin, 'onnxruntime_binding.node'));
  const commonOut = join(app, 'node_modules/onnxruntime-common');
  mkdirSync(commonOut, { recursive: true });
  copyFileSync(join(commonDir, 'package.json'), join(commonOut, 'package.json'));
  cpSync(join(commonDir, 'dist'), join(commonOut, 'dist'), { recursive: true, filter: (p) => !p.endsWith('.map') });
  return join(ortDir, bin, 'libonnxruntime.so.1');
}

function xz(source: string, target: string): void {
  execFileSync('sh', ['-c', 'xz -6 -T0 -c "$1" > "$2"', 'xz', source, target], { stdio: 'inherit' });
}

/** Debian's libvulkan1 for amd64, downloaded once into .cache/gpu-pack; undefined when none is cached and `download` is false. */
function vulkanLoaderDeb(download: boolean, log: (line: string) => void): string | undefined {
  const cached = () => (existsSync(DEB_CACHE) ? readdirSync(DEB_CACHE).find((f) => /^libvulkan1_.*_amd64\.deb$/.test(f)) : undefined);
  let found = cached();
  if (!found && download) {
    log('downloading Debian libvulkan1 (amd64) ...');
    const lists = join(DEB_CACHE, 'lists');
    mkdirSync(join(lists, 'partial'), { recursive: true });
    const amd64 = ['-oAPT::Architecture=amd64', '-oAPT::Architectures=amd64', `-oDir::State::Lists=${lists}`];
    execFileSync('apt-get', [...amd64, '-qq', 'update'], { stdio: 'inherit' });
    execFileSync('apt-get', [...amd64, '-qq', 'download', 'libvulkan1:amd64'], { cwd: DEB_CACHE, stdio: 'inherit' });
    found = cached();
  }
  return found && join(DEB_CACHE, found);
}

function filesUnder(dir: string): PackedFile[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => {
      const path = join(e.parentPath, e.name);
      return { path: relative(dir, path), bytes: statSync(path).size };
    });
}

export async function pack(options: PackOptions): Promise<PackedFile[]> {
  const { out, smoke, log } = options;
  rmSync(out, { recursive: true, force: true });
  const app = join(out, 'app');
  mkdirSync(app, { recursive: true });
  log('bundling the server, its workers and the check (esbuild) ...');
  await bundle(app);
  const libOrt = copyOnnxRuntime(app);
  if (smoke) {
    // The dry run: links, so that run.sh copies instead of decompressing (the same layout otherwise).
    symlinkSync(process.execPath, join(out, 'node'));
    symlinkSync(libOrt, join(out, 'libonnxruntime.so.1'));
  } else {
    log('compressing node and libonnxruntime.so.1 (xz -6) ...');
    xz(process.execPath, join(out, 'node.xz'));
    xz(libOrt, join(out, 'libonnxruntime.so.1.xz'));
  }
  const deb = vulkanLoaderDeb(!smoke, log);
  if (deb) copyFileSync(deb, join(out, 'libvulkan1_amd64.deb'));
  const thirdParty = packThirdPartyModels(join(app, 'third-party'), join(DEB_CACHE, 'npm'), !smoke, log);
  if (!thirdParty) log('no third-party models: none cached in .cache/gpu-pack/npm (a --smoke pack does not fetch them)');
  copyFileSync(join(HERE, 'run.sh'), join(out, 'run.sh'));
  execFileSync('chmod', ['+x', join(out, 'run.sh')]);
  const files = filesUnder(out);
  const total = files.reduce((sum, f) => sum + f.bytes, 0);
  const big = files.filter((f) => f.bytes > 2 ** 20).sort((a, b) => b.bytes - a.bytes);
  for (const f of big) log(`${(f.bytes / 2 ** 20).toFixed(1).padStart(6)} MiB  ${f.path}`);
  log(
    `${(total / 2 ** 20).toFixed(1).padStart(6)} MiB  in all (${files.length} files; limit ${PACK_LIMIT_BYTES / 2 ** 20} MiB)${smoke ? ', smoke: node and libonnxruntime.so.1 linked, not counted' : ''}`,
  );
  if (total > PACK_LIMIT_BYTES) throw new Error(`the GPU pack is ${total} bytes, over the ${PACK_LIMIT_BYTES} bytes (60 MiB) it may take`);
  return files;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const outAt = args.indexOf('--out');
  const out = outAt >= 0 && args[outAt + 1] ? resolve(args[outAt + 1]) : DEFAULT_PACK_DIR;
  await pack({ out, smoke: args.includes('--smoke'), log: (line) => process.stdout.write(`${line}\n`) }).catch((error: Error) => {
    process.stderr.write(`gpu:pack: ${error.message}\n`);
    process.exit(1);
  });
  process.stdout.write(
    `packed ${out}: on the GPU host run \`bash ${relative(process.cwd(), out).startsWith('..') ? out : relative(process.cwd(), out)}/run.sh\` (results in $OUT/gpu-check.md)\n`,
  );
}
