import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { isVersionName } from './model-folder.ts';

/** A version folder of a local cache, as the space counts it. */
interface CachedVersion {
  readonly model: string;
  readonly version: number;
  readonly bytes: number;
  /** Last downloaded or found up to date for a load, on the space's clock (0: left by an earlier run). */
  lastUse: number;
  /** A loaded version reads it (or a load is under way): never deleted. */
  held: boolean;
  /** Deletes the folder, in its cache's queue of work, unless the space holds it by then. */
  readonly remove: () => Promise<void>;
}

/** The manifest a cached version folder keeps beside its files (s3-cache.ts). */
export const VERSION_MANIFEST = '.batchwise-objects.json';

/**
 * The disk the local caches of the s3:// repositories may take together (--model-cache-disk-limit).
 * With it (and with --load-on-demand), a cache keeps the versions it downloaded after no model loads
 * them any more, so a model evicted and asked for again loads without downloading; when the versions
 * cached pass the limit, the least recently used ones no loaded version reads are deleted. The
 * limit counts complete version folders (their files' listed sizes): a download in progress can pass
 * it by its own size until it completes. Without a limit nothing is deleted.
 */
export class CacheSpace {
  private readonly versions = new Map<string, CachedVersion>();
  private readonly adopted = new Map<string, Promise<void>>();
  private clock = 0;
  private enforcing: Promise<void> = Promise.resolve();
  private warnedFull = false;
  /** Version folders deleted to stay within the limit. */
  deletions = 0;

  constructor(
    /** @default no limit */
    readonly limitBytes: number | undefined,
    private readonly logger: Logger,
  ) {}

  /** Bytes of the complete version folders cached. */
  get bytes(): number {
    let total = 0;
    for (const v of this.versions.values()) total += v.bytes;
    return total;
  }

  /**
   * Counts the versions an earlier run left in a cache folder (as least recently used, none held),
   * once per folder; `remove` deletes one in that cache's queue of work.
   */
  adopt(cacheDir: string, remove: (model: string, version: number) => Promise<void>): Promise<void> {
    let done = this.adopted.get(cacheDir);
    if (!done) {
      done = this.scan(cacheDir, remove).catch((error: unknown) =>
        this.logger.warn({ cacheDir, err: (error as Error).message }, 'counting the local model cache failed'),
      );
      this.adopted.set(cacheDir, done);
    }
    return done;
  }

  private async scan(cacheDir: string, remove: (model: string, version: number) => Promise<void>): Promise<void> {
    const models = await readdir(cacheDir, { withFileTypes: true }).catch(() => []);
    for (const model of models) {
      if (!model.isDirectory() || model.name.startsWith('.')) continue;
      for (const version of await readdir(join(cacheDir, model.name), { withFileTypes: true }).catch(() => [])) {
        if (!version.isDirectory() || !isVersionName(version.name)) continue;
        const key = keyOf(cacheDir, model.name, Number(version.name));
        if (this.versions.has(key)) continue;
        const bytes = await manifestBytes(join(cacheDir, model.name, version.name));
        this.versions.set(key, this.entry(model.name, Number(version.name), bytes, 0, false, remove));
      }
    }
  }

  /** A version folder complete in a cache for a load: held, and used now. */
  stored(cacheDir: string, model: string, version: number, bytes: number, remove: (model: string, version: number) => Promise<void>): void {
    this.versions.set(keyOf(cacheDir, model, version), this.entry(model, version, bytes, ++this.clock, true, remove));
  }

  /** The versions of a model that loaded versions read: the others of it may be deleted from now on. */
  hold(cacheDir: string, model: string, loaded: readonly number[]): void {
    for (const [key, v] of this.versions) if (v.model === model && key.startsWith(`${cacheDir}\0`)) v.held = loaded.includes(v.version);
  }

  /** A version folder deleted by its cache (prune without a space, or a new download replacing it). */
  forget(cacheDir: string, model: string, version: number): void {
    this.versions.delete(keyOf(cacheDir, model, version));
  }

  /** Whether a loaded version reads it (the cache checks again before deleting). */
  isHeld(cacheDir: string, model: string, version: number): boolean {
    return this.versions.get(keyOf(cacheDir, model, version))?.held ?? false;
  }

  /** Deletes the least recently used versions no loaded version reads until the cache fits its limit; one pass at a time. */
  enforce(): Promise<void> {
    const run = this.enforcing.then(() => this.enforceNow());
    this.enforcing = run.catch(() => undefined);
    return run;
  }

  private async enforceNow(): Promise<void> {
    const limit = this.limitBytes;
    if (limit === undefined) return;
    const candidates = [...this.versions.entries()].filter(([, v]) => !v.held).sort((a, b) => a[1].lastUse - b[1].lastUse);
    for (const [key, v] of candidates) {
      if (this.bytes <= limit) break;
      if (v.held || this.versions.get(key) !== v) continue;
      await v.remove();
      // The cache deleted it unless a load took it again meanwhile.
      if (this.versions.get(key) === v && !v.held) {
        this.versions.delete(key);
        this.deletions++;
        this.logger.info(
          { model: v.model, version: v.version, bytes: v.bytes, cacheBytes: this.bytes, limitBytes: limit },
          'deleted the least recently used model version from the local cache (--model-cache-disk-limit)',
        );
      }
    }
    if (this.bytes > limit && !this.warnedFull) {
      this.warnedFull = true;
      this.logger.warn(
        { cacheBytes: this.bytes, limitBytes: limit },
        'the local model cache holds more than --model-cache-disk-limit: the versions loaded now take it all',
      );
    } else if (this.bytes <= limit) this.warnedFull = false;
  }

  private entry(
    model: string,
    version: number,
    bytes: number,
    lastUse: number,
    held: boolean,
    remove: (model: string, version: number) => Promise<void>,
  ): CachedVersion {
    return { model, version, bytes, lastUse, held, remove: () => remove(model, version) };
  }
}

function keyOf(cacheDir: string, model: string, version: number): string {
  return `${cacheDir}\0${model}\0${version}`;
}

/** The listed sizes of a cached version's files, from its manifest; 0 when it has none. */
async function manifestBytes(versionDir: string): Promise<number> {
  try {
    const manifest = JSON.parse(await readFile(join(versionDir, VERSION_MANIFEST), 'utf8')) as {
      files?: Record<string, { size?: number }>;
    };
    return Object.values(manifest.files ?? {}).reduce((sum, f) => sum + (typeof f.size === 'number' ? f.size : 0), 0);
  } catch {
    return 0;
  }
}
