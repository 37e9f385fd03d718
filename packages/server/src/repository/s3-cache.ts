import { randomBytes } from 'node:crypto';
import { copyFile, link, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { checkModelName, isVersionName } from './model-folder.ts';
import { ProgressLog } from './progress.ts';
import { VERSION_MANIFEST, type CacheSpace } from './cache-space.ts';
import { RepositoryError } from './repository-error.ts';
import type { ModelListing, RepositoryObject } from './snapshot.ts';

/** Fetches one listed object into `dest` whole, or leaves nothing there (s3-download.ts). */
export type FetchObject = (object: RepositoryObject, dest: string, progress: ProgressLog) => Promise<void>;

/** What a cached folder holds, written beside its files: path -> ETag and size as listed. */
interface CacheManifest {
  readonly files: Record<string, { readonly etag: string; readonly size: number }>;
}

const MANIFEST = VERSION_MANIFEST;
const MODEL_MANIFEST = '.batchwise-model-objects.json';

/**
 * The local cache of a remote repository: one folder per model in Triton layout. A file is
 * reused while its ETag and size match the listing; a version folder appears only complete
 * (staged, then renamed into place) and is removed only by `prune()` or, when the cache shares a
 * CacheSpace (--model-cache-disk-limit, --load-on-demand), by the space when it needs room for
 * others and no loaded version reads it. One update or prune at a time per model folder.
 */
export class ModelCache {
  private readonly busy = new Map<string, Promise<unknown>>();

  constructor(
    readonly dir: string,
    private readonly logger: Logger,
    /** Parallel fetches per update. */
    private readonly concurrency: number,
    /** Keeps versions no model loads until the caches need room (their disk limit); without it prune() deletes them. */
    private readonly space?: CacheSpace,
  ) {}

  /**
   * Brings the model's own files (config.pbtxt, labels) and the listed `versions` up to date
   * with `listing`, fetching only what changed; returns the model's folder. Never removes a
   * version: a loaded version may need its files again (an instance restarted after a crash).
   */
  async update(listing: ModelListing, versions: readonly number[], fetch: FetchObject): Promise<string> {
    const modelDir = this.modelDir(listing.name);
    await this.space?.adopt(this.dir, this.removeVersion);
    const dir = await this.serialized(modelDir, () => this.updateNow(listing, versions, modelDir, fetch));
    await this.space?.enforce();
    return dir;
  }

  /**
   * Removes cached version folders not in `keep`; with a space, deletes nothing but tells it which
   * versions loaded versions read (`loaded`), and the others become its candidates for deletion.
   */
  async prune(modelName: string, keep: readonly number[], loaded: readonly number[] = keep): Promise<void> {
    if (this.space) {
      await this.space.adopt(this.dir, this.removeVersion);
      this.space.hold(this.dir, modelName, loaded);
      return this.space.enforce();
    }
    const modelDir = this.modelDir(modelName);
    return this.serialized(modelDir, async () => {
      const entries = await readdir(modelDir, { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        if (entry.isDirectory() && isVersionName(entry.name) && !keep.includes(Number(entry.name))) {
          await rm(join(modelDir, entry.name), { recursive: true, force: true });
          this.logger.info({ model: modelName, version: Number(entry.name) }, 'removed a version no longer loaded from the local cache');
        }
      }
    });
  }

  /** The space's deletion of one version, in the model folder's queue of work, unless a load took it again meanwhile. */
  private readonly removeVersion = (modelName: string, version: number): Promise<void> =>
    this.serialized(this.modelDir(modelName), async () => {
      if (this.space?.isHeld(this.dir, modelName, version)) return;
      await rm(join(this.modelDir(modelName), String(version)), { recursive: true, force: true });
    });

  private modelDir(modelName: string): string {
    checkModelName(modelName);
    return join(this.dir, modelName);
  }

  private async serialized<T>(modelDir: string, task: () => Promise<T>): Promise<T> {
    const previous = this.busy.get(modelDir) ?? Promise.resolve();
    const run = previous.catch(() => undefined).then(task);
    this.busy.set(modelDir, run);
    try {
      return await run;
    } finally {
      if (this.busy.get(modelDir) === run) this.busy.delete(modelDir);
    }
  }

  private async updateNow(listing: ModelListing, versions: readonly number[], modelDir: string, fetch: FetchObject): Promise<string> {
    const wanted = [...new Set(versions)].sort((a, b) => a - b);
    await mkdir(modelDir, { recursive: true });
    await removeLeftovers(modelDir);

    // Plan: which files must be fetched, which can be reused from the cache.
    const modelFiles = [...(listing.config ? [listing.config] : []), ...listing.otherFiles];
    for (const f of [...modelFiles, ...listing.versions.filter((l) => wanted.includes(l.version)).flatMap((l) => l.files)]) {
      checkObjectPath(listing.name, f.path);
    }
    const modelManifest = await readManifest(join(modelDir, MODEL_MANIFEST));
    const modelFetch: RepositoryObject[] = [];
    for (const f of modelFiles) {
      if (!(await isCached(modelManifest, f, join(modelDir, f.path)))) modelFetch.push(f);
    }
    const plans = await Promise.all(
      wanted.map(async (version) => {
        const files = listing.versions
          .find((l) => l.version === version)!
          .files.map((f) => ({
            ...f,
            path: f.path.slice(f.path.indexOf('/') + 1),
          }));
        const versionDir = join(modelDir, String(version));
        const manifest = await readManifest(join(versionDir, MANIFEST));
        const cached = await Promise.all(files.map((f) => isCached(manifest, f, join(versionDir, f.path))));
        const upToDate = cached.every(Boolean) && Object.keys(manifest?.files ?? {}).length === files.length;
        return { version, versionDir, files, cached, upToDate };
      }),
    );
    const toFetch = [...modelFetch, ...plans.flatMap((p) => (p.upToDate ? [] : p.files.filter((_, i) => !p.cached[i])))];
    const totalBytes = toFetch.reduce((sum, f) => sum + f.size, 0);
    const log = this.logger.child({ model: listing.name, versions: wanted });
    if (toFetch.length === 0) {
      log.debug('model already in the local cache, nothing to download');
    } else {
      log.info({ files: toFetch.length, bytesTotal: totalBytes, cacheDir: modelDir }, 'downloading model from S3');
    }
    const progress = new ProgressLog({ logger: log, msg: 'downloading model from S3', totalBytes, fields: { files: toFetch.length } });
    const pool = new Pool(this.concurrency);

    // Model-level files (config.pbtxt, labels): each replaced atomically by rename.
    const modelJobs = modelFetch.map((f) => pool.run(() => fetch(f, join(modelDir, f.path), progress)));
    // Version folders: staged complete, then renamed into place.
    const versionJobs = plans
      .filter((p) => !p.upToDate)
      .map(async (plan) => {
        const staging = join(modelDir, `.staging-${plan.version}-${randomBytes(4).toString('hex')}`);
        await mkdir(staging, { recursive: true });
        try {
          await Promise.all(
            plan.files.map(async (f, i) => {
              const dest = join(staging, f.path);
              await mkdir(dirname(dest), { recursive: true });
              if (plan.cached[i]) await linkOrCopy(join(plan.versionDir, f.path), dest);
              else await pool.run(() => fetch(f, dest, progress));
            }),
          );
          await writeManifest(join(staging, MANIFEST), plan.files);
          await swapIntoPlace(staging, plan.versionDir);
          this.space?.stored(this.dir, listing.name, plan.version, bytesOf(plan.files), this.removeVersion);
          log.info(
            { version: plan.version, files: plan.files.length, bytes: bytesOf(plan.files) },
            'model version complete in the local cache',
          );
        } catch (error) {
          await rm(staging, { recursive: true, force: true });
          throw error;
        }
      });
    // Versions already complete are used now too: held while they load, and the most recently used.
    for (const plan of plans)
      if (plan.upToDate) this.space?.stored(this.dir, listing.name, plan.version, bytesOf(plan.files), this.removeVersion);
    const results = await Promise.allSettled([...modelJobs, ...versionJobs]);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;

    if (!listing.config) await rm(join(modelDir, 'config.pbtxt'), { force: true });
    // Model-level files gone from the repository go from the cache too.
    for (const path of Object.keys(modelManifest?.files ?? {})) {
      if (!modelFiles.some((f) => f.path === path)) await rm(join(modelDir, path), { force: true });
    }
    await writeManifest(join(modelDir, MODEL_MANIFEST), modelFiles);
    if (toFetch.length > 0) progress.finish();
    return modelDir;
  }
}

/**
 * A listed object's path inside its model folder (`1/model.onnx`) becomes a file of the cache:
 * plain segments only, so that no key (`m/1/../../../x`, `m//etc/x`: S3 keys are any string)
 * lands outside the model's cache folder. Such a key fails the model before anything is written.
 */
function checkObjectPath(model: string, path: string): void {
  if (path.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')) {
    throw new RepositoryError(
      'INVALID',
      `model '${model}': the object '${path}' of its folder is not a plain path (an empty, '.' or '..' segment), so it is not downloaded: rename it in the repository`,
    );
  }
}

function bytesOf(files: readonly { readonly size: number }[]): number {
  return files.reduce((sum, f) => sum + f.size, 0);
}

/** Runs at most `limit` tasks at once. */
class Pool {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      return await task();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

async function readManifest(path: string): Promise<CacheManifest | undefined> {
  try {
    const parsed = JSON.parse(await readFile(path, 'utf8')) as CacheManifest;
    return typeof parsed?.files === 'object' && parsed.files !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

async function writeManifest(path: string, files: readonly RepositoryObject[]): Promise<void> {
  const manifest: CacheManifest = { files: Object.fromEntries(files.map((f) => [f.path, { etag: f.etag, size: f.size }])) };
  const temp = `${path}.part-${randomBytes(4).toString('hex')}`;
  await writeFile(temp, JSON.stringify(manifest));
  await rename(temp, path);
}

/** Same ETag and size as when it was downloaded, and the file is still there whole in size. */
async function isCached(manifest: CacheManifest | undefined, object: RepositoryObject, path: string): Promise<boolean> {
  const entry = manifest?.files[object.path];
  if (!entry || entry.etag !== object.etag || entry.size !== object.size) return false;
  const s = await stat(path).catch(() => undefined);
  return s?.isFile() === true && s.size === object.size;
}

async function linkOrCopy(from: string, to: string): Promise<void> {
  try {
    await link(from, to);
  } catch {
    await copyFile(from, to);
  }
}

/** Puts a complete staging folder at `dir`, replacing what was there; `dir` is never partial. */
async function swapIntoPlace(staging: string, dir: string): Promise<void> {
  try {
    await rename(staging, dir);
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
  }
  const old = `${dirname(dir)}/.old-${randomBytes(4).toString('hex')}`;
  await rename(dir, old);
  await rename(staging, dir);
  await rm(old, { recursive: true, force: true });
}

/** Staging folders and temp files left by a crash. */
async function removeLeftovers(modelDir: string): Promise<void> {
  for (const entry of await readdir(modelDir, { withFileTypes: true })) {
    if (/^\.(staging|old)-/.test(entry.name) || /\.part-[0-9a-f]{8}$/.test(entry.name)) {
      await rm(join(modelDir, entry.name), { recursive: true, force: true });
    }
  }
}
