import type { ListedModel, ModelSource } from '../repository/model-source.ts';

/** What the repositories held at the last look. */
export interface ScanResult {
  /** Every model name found, duplicates included. */
  readonly names: ReadonlySet<string>;
  /** Names found in more than one repository (left out of what a scan returns). */
  readonly duplicates: ReadonlySet<string>;
}

/** Finds models in the repositories: listing only, nothing downloaded or loaded. */
export class RepositoryScan implements ScanResult {
  names: ReadonlySet<string> = new Set();
  duplicates: ReadonlySet<string> = new Set();
  /** The models the last look found, duplicates left out: what a request may load (--load-on-demand). */
  found: ReadonlyMap<string, ListedModel> = new Map();

  constructor(private readonly sources: readonly ModelSource[]) {}

  /** The repositories' locations, for log lines. */
  get locations(): string {
    return this.sources.map((s) => s.location).join(', ');
  }

  /** One look at every repository: model folders by name. A name found twice is left out. */
  async scan(): Promise<Map<string, ListedModel>> {
    const found = new Map<string, ListedModel>();
    const duplicates = new Set<string>();
    for (const source of this.sources) {
      for (const listed of await source.listModels()) {
        if (found.has(listed.name)) duplicates.add(listed.name);
        found.set(listed.name, listed);
      }
    }
    for (const name of duplicates) found.delete(name);
    this.names = new Set([...found.keys(), ...duplicates]);
    this.duplicates = duplicates;
    this.found = found;
    return found;
  }
}
