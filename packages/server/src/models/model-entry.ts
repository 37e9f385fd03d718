import type { ModelConfig } from '../config/model-config.ts';
import type { ListedModel } from '../repository/model-source.ts';
import type { ModelState } from '../protocol/types.ts';
import type { LoadedVersion } from './loaded-version.ts';

/** A version that serves requests. */
export interface ServingVersion {
  readonly loaded: LoadedVersion;
  /** Identity of what it was loaded from (config text + version folder contents). */
  readonly fingerprint: string;
  /** The model folder it was loaded from; its instances read their model file there when replaced. */
  readonly dir: string;
}

/** Everything the server holds about one model name: written by the lifecycle, read by the registry. */
export interface ModelEntry {
  readonly name: string;
  state: ModelState;
  reason: string | undefined;
  /** Whether the server is meant to serve it (readiness counts only these). */
  wanted: boolean;
  serving: Map<string, ServingVersion>;
  failedVersions: Map<string, string>;
  /**
   * The versions that served and no longer do (the model was unloaded, evicted or left the
   * repository, or a reload retired them), ascending: the index keeps a row for each, as Triton's
   * does (UNLOADING while it drains, then UNAVAILABLE), until it serves again.
   */
  unloadedVersions: readonly string[];
  /** What each failed version was loaded from: not retried until it changes. */
  failedFingerprints: Map<string, string>;
  /** Where it was last found; undefined until then. */
  listed: ListedModel | undefined;
  /** The config override of the load that last succeeded (the repository API's `config`), to reload it with. */
  configOverride: ModelConfig | undefined;
  /** Versions its policy selected at the last look (their cached files are kept). */
  selected: readonly number[];
  /** Retired versions still finishing their in-flight requests (their cached files are kept). */
  draining: Set<LoadedVersion>;
  /** Serialises loads, unloads and cache pruning of one model. */
  busy: Promise<void>;
  /** Why the model folder's canary declaration is invalid (logged once per reason). */
  canaryError: string | undefined;
  /** Temporary folders of file overrides, removed once no version loaded from them serves or drains. */
  overrideDirs: Set<string>;
  /**
   * Loaded for requests (--load-on-demand), so it may be evicted and readiness does not wait for it;
   * false for models the start-up or a load request loaded, which stay pinned until unloaded.
   */
  onDemand: boolean;
  /** When a request last resolved it, on the registry's clock of uses (larger is more recent): eviction's LRU order. */
  lastUse: number;
  /** Loads of it under way (reconcile): it is not evicted meanwhile. */
  reconciling: number;
}

/** Triton's MODEL_READY_REASON_DUPLICATE. */
export const DUPLICATE = 'model appears in two or more repositories';

/** A model the server has heard of and holds nothing of yet. */
export function newModelEntry(name: string): ModelEntry {
  return {
    name,
    state: 'UNKNOWN',
    reason: undefined,
    wanted: false,
    serving: new Map(),
    failedVersions: new Map(),
    unloadedVersions: [],
    failedFingerprints: new Map(),
    listed: undefined,
    configOverride: undefined,
    selected: [],
    draining: new Set(),
    busy: Promise.resolve(),
    overrideDirs: new Set(),
    canaryError: undefined,
    onDemand: false,
    lastUse: 0,
    reconciling: 0,
  };
}
