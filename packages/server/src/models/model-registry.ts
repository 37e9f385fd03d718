import type { ModelConfig } from '../config/model-config.ts';
import { Errors } from '../errors/errors.ts';
import type { RepositoryIndexEntry } from '../protocol/types.ts';
import type { CanaryControl, RouteKeys } from './canary-control.ts';
import type { LoadedVersion } from './loaded-version.ts';
import { DUPLICATE, newModelEntry, type ModelEntry } from './model-entry.ts';
import { UNLOADED_REASON } from './on-demand-loads.ts';
import type { ScanResult } from './repository-scan.ts';

/**
 * The read side of the models: what serves, what is ready, the repository index. A version
 * argument of undefined means the version policy's choice (the highest ready version); the
 * facade (core/) turns the wire's empty string into undefined before it asks.
 */
export interface ModelRegistry {
  /**
   * The version a request addresses: the given one, or (naming none) the one a canary split
   * chooses by `keys`, else the highest ready one. Throws Triton's errors.
   */
  resolve(modelName: string, modelVersion?: string, keys?: RouteKeys): LoadedVersion;
  isKnown(modelName: string): boolean;
  isModelReady(modelName: string, modelVersion?: string): boolean;
  /** Version numbers that serve, in ascending order. */
  readyVersions(modelName: string): string[];
  /** Ready when every model the server is meant to serve has a ready version. */
  allReady(): boolean;
  configOf(modelName: string, modelVersion?: string): ModelConfig;
  loadedVersions(): LoadedVersion[];
  /**
   * Triton's repository index: every model of the repositories at the last look (name only
   * when never loaded), each version with its state; `readyOnly` keeps the READY rows.
   */
  index(readyOnly: boolean): RepositoryIndexEntry[];
}

/**
 * With --load-on-demand the index says why a model does not serve: never loaded yet, evicted (the
 * entry's reason), or failed and when it is tried again (`note`).
 */
export interface OnDemandIndexNotes {
  /** The reason of a model of the repositories that was never loaded. */
  readonly neverLoaded: string;
  /** What to add to the reason of a model that does not serve (a failed load's time and back-off), if anything. */
  note(modelName: string): string | undefined;
}

/** The model entries by name; the lifecycle writes them, everything else reads them through ModelRegistry. */
export class ModelTable implements ModelRegistry {
  private readonly models = new Map<string, ModelEntry>();
  /** The clock of ModelEntry.lastUse: one tick per use. */
  private uses = 0;

  constructor(
    private readonly repositories: ScanResult,
    private readonly canary?: CanaryControl,
    private readonly onDemand?: OnDemandIndexNotes,
  ) {}

  /** Marks the model used now (eviction takes the least recently used first). */
  touch(entry: ModelEntry): void {
    entry.lastUse = ++this.uses;
  }

  /** The entry of a model, created on first mention. */
  entryFor(name: string): ModelEntry {
    let entry = this.models.get(name);
    if (!entry) {
      entry = newModelEntry(name);
      this.models.set(name, entry);
    }
    return entry;
  }

  get(name: string): ModelEntry | undefined {
    return this.models.get(name);
  }

  entries(): IterableIterator<ModelEntry> {
    return this.models.values();
  }

  resolve(modelName: string, modelVersion?: string, keys?: RouteKeys): LoadedVersion {
    const entry = this.models.get(modelName);
    if (!entry) throw Errors.unknownModel(modelName);
    let found: LoadedVersion | undefined;
    if (modelVersion !== undefined) {
      found = entry.serving.get(modelVersion)?.loaded;
      if (!found) throw Errors.unknownVersion(modelName, modelVersion);
    } else {
      if (entry.serving.size === 0) throw Errors.modelNotReady(modelName, entry.reason);
      const split = this.canary?.versionFor(modelName, keys, entry.serving);
      found = split === undefined ? this.highest(entry) : entry.serving.get(split)!.loaded;
    }
    const unready = this.unreadyStep(found);
    if (unready) throw Errors.modelNotReady(modelName, unready);
    entry.lastUse = ++this.uses;
    return found;
  }

  /**
   * Why an ensemble cannot run now: the first step whose model has no ready version it may use
   * (Triton keeps an ensemble ready only while its composing models are). Undefined when it can,
   * and for every model that is not an ensemble. Ensembles whose steps lead back to them never
   * load, so the walk ends.
   */
  private unreadyStep(loaded: LoadedVersion): string | undefined {
    if (!loaded.ensemble) return undefined;
    for (const step of loaded.ensemble.steps) {
      if (!this.isModelReady(step.modelName, step.modelVersion)) {
        const version = step.modelVersion === undefined ? '' : ` version ${step.modelVersion}`;
        return `step ${step.number}'s model '${step.modelName}'${version} is not ready`;
      }
    }
    return undefined;
  }

  isKnown(modelName: string): boolean {
    return this.models.has(modelName);
  }

  /** Why the model cannot serve a request naming no version (no version loaded, a step not ready), or undefined when it can. */
  unreadyReason(modelName: string): string | undefined {
    const entry = this.models.get(modelName);
    if (!entry || entry.serving.size === 0) return entry?.reason ?? 'no version is loaded';
    return this.unreadyStep(this.highest(entry));
  }

  isModelReady(modelName: string, modelVersion?: string): boolean {
    const entry = this.models.get(modelName);
    if (!entry || entry.serving.size === 0) return false;
    if (modelVersion !== undefined && !entry.serving.has(modelVersion)) return false;
    const loaded = modelVersion !== undefined ? entry.serving.get(modelVersion)!.loaded : this.highest(entry);
    return this.unreadyStep(loaded) === undefined;
  }

  private highest(entry: ModelEntry): LoadedVersion {
    let found: LoadedVersion | undefined;
    for (const { loaded } of entry.serving.values()) if (!found || Number(loaded.version) > Number(found.version)) found = loaded;
    return found!;
  }

  readyVersions(modelName: string): string[] {
    const entry = this.models.get(modelName);
    if (!entry) return [];
    return [...entry.serving.keys()].sort((a, b) => Number(a) - Number(b));
  }

  allReady(): boolean {
    for (const entry of this.models.values()) {
      // A model loaded for requests (--load-on-demand) comes and goes; readiness waits only for the pinned ones.
      if (entry.wanted && !entry.onDemand && (entry.state !== 'READY' || !this.isModelReady(entry.name))) return false;
    }
    return true;
  }

  configOf(modelName: string, modelVersion?: string): ModelConfig {
    return this.resolve(modelName, modelVersion).config;
  }

  loadedVersions(): LoadedVersion[] {
    return [...this.models.values()].flatMap((e) => [...e.serving.values()].map((s) => s.loaded));
  }

  index(readyOnly: boolean): RepositoryIndexEntry[] {
    const rows: RepositoryIndexEntry[] = [];
    const { names: repositoryNames, duplicates } = this.repositories;
    const names = [...new Set([...repositoryNames, ...this.models.keys()])].sort((a, b) => a.localeCompare(b));
    for (const name of names) {
      const entry = this.models.get(name);
      if (duplicates.has(name) || !entry) {
        if (readyOnly) continue;
        if (duplicates.has(name)) rows.push({ name, state: 'UNAVAILABLE', reason: DUPLICATE });
        else rows.push(this.onDemand ? { name, state: 'UNAVAILABLE', reason: this.onDemand.neverLoaded } : { name });
        continue;
      }
      rows.push(...this.entryRows(entry, readyOnly));
    }
    return rows;
  }

  /** A loaded (or once loaded) model's rows, by version ascending as Triton lists them; a row without a version last. */
  private entryRows(entry: ModelEntry, readyOnly: boolean): RepositoryIndexEntry[] {
    const out: RepositoryIndexEntry[] = [];
    const note = entry.serving.size === 0 ? this.onDemand?.note(entry.name) : undefined;
    const noted = (reason: string) => (note === undefined ? reason : `${reason}; ${note}`);
    for (const [version, { loaded }] of entry.serving) {
      const unready = this.unreadyStep(loaded);
      if (unready === undefined) out.push({ name: entry.name, version, state: 'READY', reason: '' });
      else if (!readyOnly) out.push({ name: entry.name, version, state: 'UNAVAILABLE', reason: unready });
    }
    if (readyOnly) return out;
    for (const [version, reason] of entry.failedVersions) {
      if (!entry.serving.has(version)) out.push({ name: entry.name, version, state: 'UNAVAILABLE', reason: noted(reason) });
    }
    // A version that served and no longer does: UNLOADING while its requests drain (no reason, as
    // Triton's), then UNAVAILABLE with the unload's reason (a version a reload retired: "unloaded").
    const detached = entry.serving.size === 0 && entry.failedVersions.size === 0;
    const unloadedReason = detached ? noted(entry.reason ?? '') : UNLOADED_REASON;
    for (const version of entry.unloadedVersions) {
      if (entry.serving.has(version) || entry.failedVersions.has(version)) continue;
      const draining = [...entry.draining].some((v) => v.version === version);
      out.push(
        draining
          ? { name: entry.name, version, state: 'UNLOADING', reason: '' }
          : { name: entry.name, version, state: detached ? entry.state : 'UNAVAILABLE', reason: unloadedReason },
      );
    }
    if (detached && entry.unloadedVersions.length === 0) {
      out.push({ name: entry.name, state: entry.state, reason: noted(entry.reason ?? '') });
    } else if (entry.serving.size > 0 && entry.reason && entry.failedVersions.size === 0) {
      // A config that no longer parses: the old version serves on, and the index says why nothing newer does.
      out.push({ name: entry.name, state: 'UNAVAILABLE', reason: entry.reason });
    }
    return out.sort((x, y) => (x.version === undefined ? 1 : y.version === undefined ? -1 : Number(x.version) - Number(y.version)));
  }
}
