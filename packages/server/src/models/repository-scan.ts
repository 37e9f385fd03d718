import type { ListedModel, ModelSource } from '../repository/model-source.ts';
import { checkModelName } from '../repository/model-folder.ts';
import { Errors } from '../errors/errors.ts';
import { fileErrorText } from '../repository/model-paths.ts';
import type { ModelFilter } from './model-filter.ts';

/** What the repositories held at the last look. */
export interface ScanResult {
  /** Every model name found, duplicates included. */
  readonly names: ReadonlySet<string>;
  /** Names found in more than one repository (left out of what a scan returns). */
  readonly duplicates: ReadonlySet<string>;
}

/**
 * How long a name that one look found in no repository is answered from memory: requests for a
 * model that does not exist cost no repository request each, and a model uploaded a moment after
 * a request missed it is found by the requests after this.
 */
export const MISS_MEMORY_MS = 1000;
/** Misses remembered at most; past it the memory starts over (names that do not exist are unbounded). */
const MAX_MISSES = 10_000;

/**
 * Finds models in the repositories: listing only, nothing downloaded or loaded. With a filter
 * (--model-filter), a model outside it is never found.
 */
export class RepositoryScan implements ScanResult {
  names: ReadonlySet<string> = new Set();
  duplicates: ReadonlySet<string> = new Set();
  /** The models the last look found, duplicates left out: what a request may load (--load-on-demand). */
  found: ReadonlyMap<string, ListedModel> = new Map();
  /** Looks for single models under way, shared by the requests naming the same model. */
  private readonly lookups = new Map<string, Promise<ListedModel | undefined>>();
  /** Names a look for a single model did not find, until when that answer holds (Date.now() ms). */
  private readonly misses = new Map<string, number>();
  /** Models looks for single models found, and when: a listing begun before them may have missed them. */
  private readonly foundAlone = new Map<string, { readonly listed: ListedModel; readonly atMs: number }>();

  constructor(
    private readonly sources: readonly ModelSource[],
    private readonly filter?: ModelFilter,
  ) {}

  /** The repositories' locations, for log lines. */
  get locations(): string {
    return this.sources.map((s) => s.location).join(', ');
  }

  /** Whether this server serves the model at all (--model-filter). */
  admits(name: string): boolean {
    return this.filter?.admits(name) ?? true;
  }

  /** One look at every repository: model folders by name. A name found twice is left out. */
  async scan(): Promise<Map<string, ListedModel>> {
    const startedMs = Date.now();
    const found = new Map<string, ListedModel>();
    const duplicates = new Set<string>();
    for (const source of this.sources) {
      for (const listed of await source.listModels()) {
        if (!this.admits(listed.name)) continue;
        if (found.has(listed.name)) duplicates.add(listed.name);
        found.set(listed.name, listed);
      }
    }
    for (const name of duplicates) found.delete(name);
    for (const [name, alone] of this.foundAlone) {
      if (alone.atMs >= startedMs && !found.has(name) && !duplicates.has(name)) found.set(name, alone.listed);
    }
    this.foundAlone.clear();
    this.names = new Set([...found.keys(), ...duplicates]);
    this.duplicates = duplicates;
    this.found = found;
    this.misses.clear();
    return found;
  }

  /**
   * The model as the last look found it, or else one look for it alone in every repository: a model
   * added since the last listing is found by the first request naming it, without waiting for the
   * next (--load-on-demand). Undefined when no repository has it, when two have it (the next
   * listing reports the duplicate), and when the filter leaves it out; a name missed is answered
   * from memory for MISS_MEMORY_MS. Throws UNAVAILABLE when a repository cannot be read.
   */
  async find(name: string): Promise<ListedModel | undefined> {
    const known = this.found.get(name);
    if (known || !this.admits(name) || !isFolderName(name) || this.duplicates.has(name)) return known;
    if ((this.misses.get(name) ?? 0) > Date.now()) return undefined;
    let lookup = this.lookups.get(name);
    if (!lookup) {
      lookup = this.lookFor(name).finally(() => this.lookups.delete(name));
      this.lookups.set(name, lookup);
    }
    return lookup;
  }

  private async lookFor(name: string): Promise<ListedModel | undefined> {
    let hits: ListedModel[];
    try {
      hits = (await Promise.all(this.sources.map((source) => source.findModel(name)))).filter((hit) => hit !== undefined);
    } catch (error) {
      throw Errors.unavailable(`looking for model '${name}' in ${this.locations} failed: ${fileErrorText(error)}`);
    }
    const listed = hits.length === 1 ? hits[0] : undefined;
    if (!listed) {
      if (this.misses.size >= MAX_MISSES) this.misses.clear();
      this.misses.set(name, Date.now() + MISS_MEMORY_MS);
      return undefined;
    }
    // A listing that ended meanwhile may have found it already: keep that one.
    const already = this.found.get(name);
    if (already) return already;
    this.found = new Map([...this.found, [name, listed]]);
    this.foundAlone.set(name, { listed, atMs: Date.now() });
    this.names = new Set([...this.names, name]);
    return listed;
  }
}

function isFolderName(name: string): boolean {
  try {
    checkModelName(name);
    return true;
  } catch {
    return false;
  }
}
