import type { Logger } from 'pino';
import { printModelConfig } from '../config/index.ts';
import type { ListedModel, ModelSource } from '../repository/model-source.ts';
import { withBackoff } from '../repository/backoff.ts';
import { writeOverrideModel } from '../repository/override-model.ts';
import { Errors, toInferenceServerError } from '../errors/errors.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { fileErrorText } from '../repository/model-paths.ts';
import { ALLOW_CODE_OVERRIDES_FLAG, codeInConfigOverride, codeInFileOverrides } from './code-overrides.ts';
import { configFromJson } from './config-override.ts';
import { checkNameToLoad, DEFAULT_FILE_OVERRIDE_MAX_BYTES, modelLoadRequestOf, type LoadParameters } from './load-parameters.ts';
import type { ModelControl, UnloadOptions } from './model-control.ts';
import { DUPLICATE } from './model-entry.ts';
import { CanaryControl } from './canary-control.ts';
import { ModelLifecycle } from './model-lifecycle.ts';
import { readConfig, type LoaderOptions } from './model-loader.ts';
import { ModelTable, type ModelRegistry } from './model-registry.ts';
import { RepositoryScan } from './repository-scan.ts';
import type { LoadedVersion } from './loaded-version.ts';
import type { ModelEntry } from './model-entry.ts';
import { ModelResidency } from './model-residency.ts';
import { OnDemandLoads, UNLOADED_REASON, type OnDemandOptions } from './on-demand-loads.ts';
import { MODEL_FILTER_FLAG, type ModelFilter } from './model-filter.ts';

export type ModelControlMode = 'none' | 'poll' | 'explicit';

export interface ModelManagerOptions extends LoaderOptions {
  readonly controlMode: ModelControlMode;
  /** explicit mode: models loaded at start-up ('*' = all). */
  readonly startupModels: readonly string[];
  /** Largest total size of the file overrides of one load request, bytes. @default 128 MiB */
  readonly maxLoadFileBytes?: number;
  /**
   * Load requests may bring code: the files of a JavaScript model, node_modules, a config that
   * switches a model to js (--allow-code-overrides). @default false: refused with PERMISSION_DENIED
   */
  readonly allowCodeOverrides?: boolean;
  /**
   * --load-on-demand: a request for a model of the repositories that does not serve loads it, in
   * every control mode; the start-up loads only --load-model's models. @default off
   */
  readonly onDemand?: OnDemandOptions;
  /** --model-memory-limit and --model-gpu-memory-limit (per GPU), bytes. @default no limits */
  readonly memoryLimits?: { readonly hostBytes?: number; readonly gpuBytesPerDevice?: number };
  /** --model-filter: the only models of the repositories this server serves. @default every model */
  readonly modelFilter?: ModelFilter;
}

/** What loaded models take, for the metrics. */
export interface ResidencyFigures {
  /** Models with a version serving. */
  readonly modelsLoaded: number;
  readonly hostBytes: number;
  readonly hostLimitBytes: number | undefined;
  readonly gpuBytes: ReadonlyMap<number, number>;
  readonly gpuLimitBytes: number | undefined;
}

/** How long a load waits for room when the server does not load on demand (loads at start-up or by request), ms. */
const ROOM_WAIT_MS = 60_000;

/** The index's reason for a model of the repositories never loaded (--load-on-demand). */
export const NEVER_LOADED = 'not loaded: loads on its first request (--load-on-demand)';

/** Triton's words, in POLL and NONE mode alike (model_repository_manager.cc). */
const NOT_ALLOWED = 'explicit model load / unload is not allowed if polling is enabled';

/**
 * Decides what the server serves, by control mode: the start-up load, polling, and the
 * repository extension's load and unload. It composes the repository scan (what exists), the
 * lifecycle (loading, swapping, draining) and the registry (what serves, read by the facade
 * through `registry`). Knows nothing of protocols.
 */
export class ModelManager implements ModelControl {
  private polling: NodeJS.Timeout | undefined;
  private readonly stopping = new AbortController();
  private pollInFlight: Promise<void> | undefined;
  private readonly repositories: RepositoryScan;
  private readonly table: ModelTable;
  private readonly lifecycle: ModelLifecycle;
  private readonly canary: CanaryControl;
  private readonly residency: ModelResidency;
  private readonly onDemand: OnDemandLoads | undefined;

  constructor(
    sources: readonly ModelSource[],
    private readonly options: ModelManagerOptions,
  ) {
    const filter = options.modelFilter;
    const outside = filter && options.startupModels.find((name) => name !== '*' && !filter.admits(name));
    if (outside !== undefined) {
      throw new Error(`--load-model '${outside}' is outside ${MODEL_FILTER_FLAG} (${filter!.description}): it would never load`);
    }
    this.repositories = new RepositoryScan(sources, filter);
    this.canary = new CanaryControl({
      metrics: options.metrics,
      logger: options.logger,
      servingVersions: (model) => this.table.get(model)?.serving ?? new Map(),
    });
    this.residency = new ModelResidency(
      { ...options.memoryLimits, roomWaitMs: options.onDemand?.timeoutMs ?? ROOM_WAIT_MS },
      {
        evictable: () => this.evictable(),
        isPinned: (name) => this.table.get(name)?.onDemand !== true,
        evict: (name, loading) => this.evict(name, loading),
      },
    );
    this.onDemand =
      options.onDemand &&
      new OnDemandLoads(options.onDemand, {
        load: (name) => this.loadForRequestNow(name),
        unready: (name) => this.table.unreadyReason(name),
        observeWait: (seconds) => options.metrics.loadWaitSeconds.observe(seconds),
      });
    const onDemand = this.onDemand;
    this.table = new ModelTable(
      this.repositories,
      this.canary,
      onDemand && { neverLoaded: NEVER_LOADED, note: (name) => onDemand.note(name) },
    );
    // In explicit mode, loading an ensemble loads the step models that do not serve, as in Triton; with
    // --load-on-demand every mode does, as loads for requests (a pinned ensemble keeps them from eviction).
    const loadStepModel = onDemand
      ? (name: string) => onDemand.waitFor(name)
      : options.controlMode === 'explicit'
        ? (name: string) => this.load(name)
        : undefined;
    this.lifecycle = new ModelLifecycle(
      this.table,
      { ...options, residency: this.residency },
      this.stopping.signal,
      loadStepModel,
      this.canary,
    );
  }

  /** What serves, for the facade and readiness. */
  get registry(): ModelRegistry {
    return this.table;
  }

  private get logger(): Logger {
    return this.options.logger;
  }

  get controlMode(): ModelControlMode {
    return this.options.controlMode;
  }

  /** Start-up load: every model (none, poll) or the --load-model ones (explicit). */
  async start(): Promise<void> {
    // An unreachable repository at start-up is retried: the server is live, not ready, meanwhile.
    const found = await withBackoff(() => this.repositories.scan(), {
      logger: this.logger,
      what: `listing ${this.repositories.locations}`,
      signal: this.stopping.signal,
    });
    const { duplicates } = this.repositories;
    // Only the models to load are downloaded; one that fails leaves the others loading. With
    // --load-on-demand the start-up loads only --load-model's, whatever the mode: requests load the rest.
    const all = this.options.startupModels.includes('*') || (this.options.controlMode !== 'explicit' && !this.onDemand);
    const wanted = all ? [...found.keys(), ...duplicates] : [...this.options.startupModels];
    await Promise.all(
      wanted.map(async (name) => {
        const listed = found.get(name);
        if (duplicates.has(name)) this.lifecycle.markFailed(name, DUPLICATE);
        else if (!listed) this.lifecycle.markFailed(name, `model '${name}' was not found in any model repository`);
        else await this.lifecycle.reconcile(listed);
      }),
    );
  }

  /** poll mode: look at the repositories every `intervalMs`; polls never overlap. */
  startPolling(intervalMs: number): void {
    this.polling = setInterval(() => {
      if (this.pollInFlight) return;
      this.pollInFlight = this.pollOnce().finally(() => (this.pollInFlight = undefined));
    }, intervalMs);
    this.polling.unref();
  }

  /**
   * One poll: load what is new or changed, unload what disappeared (or now appears in two
   * repositories, as Triton does). Errors never touch serving models; retired versions drain
   * in the background, so a slow request never holds up the next poll.
   */
  async pollOnce(): Promise<void> {
    let found: Map<string, ListedModel>;
    try {
      found = await this.repositories.scan();
    } catch (error) {
      this.logger.warn({ err: toInferenceServerError(error).message }, 'repository poll failed; serving continues');
      return;
    }
    const work: Promise<unknown>[] = [];
    for (const listed of found.values()) {
      // With --load-on-demand a poll reloads what is loaded (or meant to be) if it changed; requests load the rest.
      if (!this.onDemand || this.table.get(listed.name)?.wanted) work.push(this.lifecycle.reconcile(listed));
    }
    for (const entry of this.table.entries()) {
      if (entry.wanted && entry.listed && !found.has(entry.name)) {
        const reason = this.repositories.duplicates.has(entry.name) ? DUPLICATE : 'removed from the repository';
        if (reason === DUPLICATE)
          this.logger.error({ model: entry.name }, `failed to poll model '${entry.name}': not unique across all model repositories`);
        work.push(this.lifecycle.unload(entry, reason));
      }
    }
    await Promise.all(work);
  }

  /**
   * Repository extension: load (or reload) a model, optionally with a JSON config override and
   * file overrides. With file overrides the model loads from a temporary folder holding only
   * them and the config, as in Triton, whether or not the repositories have the model. A
   * request that would bring code is refused before anything is written or read, unless the
   * server allows it (allowCodeOverrides).
   */
  async load(name: string, parameters: LoadParameters = {}): Promise<void> {
    if (this.options.controlMode !== 'explicit') throw Errors.unavailable(NOT_ALLOWED);
    checkNameToLoad(name);
    if (!this.repositories.admits(name)) {
      throw Errors.invalidArg(
        `failed to load '${name}': this server serves only the models of ${MODEL_FILTER_FLAG} (${this.options.modelFilter!.description})`,
      );
    }
    const request = modelLoadRequestOf(parameters, this.options.maxLoadFileBytes ?? DEFAULT_FILE_OVERRIDE_MAX_BYTES);
    const override = request.config === undefined ? undefined : configFromJson(name, request.config);
    let listed: ListedModel;
    let overrideDir: string | undefined;
    if (override && request.files.size > 0) {
      this.refuseCode(name, codeInFileOverrides(override, request.files, this.options.backends));
      const written = await writeOverrideModel(name, printModelConfig(override), request.files);
      overrideDir = written.dir;
      listed = written.listed;
    } else {
      const found = await this.repositories.scan().catch((error: unknown) => {
        throw Errors.modelRepositoryPollFailed(name, `listing the model repositories failed: ${fileErrorText(error)}`);
      });
      if (this.repositories.duplicates.has(name)) throw Errors.invalidArg(`failed to load '${name}': ${DUPLICATE}`);
      const repositoryModel = found.get(name);
      if (!repositoryModel) throw Errors.invalidArg(`failed to load '${name}': model '${name}' was not found in any model repository`);
      if (override && !this.options.allowCodeOverrides) {
        this.refuseCode(name, await codeInConfigOverride(override, () => this.repositoryConfig(repositoryModel), this.options.backends));
      }
      listed = repositoryModel;
    }
    let failure: string | undefined;
    // Loaded by request of the API: pinned until unloaded, never evicted.
    this.table.entryFor(name).onDemand = false;
    try {
      failure = await this.lifecycle.reconcile(listed, override, true);
    } finally {
      // The files of an override that did not load, or that this load replaced, go once unused. A
      // folder is registered only once its load is over: a prune that an earlier load scheduled
      // (it runs before this load's reconcile) would otherwise remove it while it loads.
      const entry = this.table.entryFor(name);
      if (overrideDir !== undefined) entry.overrideDirs.add(overrideDir);
      this.lifecycle.schedulePrune(entry);
    }
    if (failure !== undefined) throw Errors.invalidArg(`failed to load '${name}': ${failure}`);
    this.onDemand?.forget(name);
    await this.reloadEnsemblesOver(name, new Set([name]));
  }

  /**
   * After a model (re)loads in explicit mode, the ensembles that run it as a step load again, as
   * Triton reloads a composing model's dependents: what an ensemble decided at load from its steps
   * (decoupled or not, batching reshapes) follows the step's new config. Each reloads with the config
   * it was loaded with; one that fails keeps serving its old version and says why in the index.
   * Nested ensembles follow in turn (poll mode does the same at every poll: an ensemble's fingerprint
   * holds its steps').
   */
  private async reloadEnsemblesOver(step: string, seen: Set<string>): Promise<void> {
    const dependents = [...this.table.entries()].filter(
      (entry) =>
        !seen.has(entry.name) &&
        entry.listed !== undefined &&
        [...entry.serving.values()].some((s) => s.loaded.ensemble?.steps.some((x) => x.modelName === step)),
    );
    for (const entry of dependents) {
      seen.add(entry.name);
      this.logger.info(
        { model: entry.name, step },
        'a step model of the ensemble was loaded: the ensemble loads again if what it runs changed',
      );
      const failure = await this.lifecycle.reconcile(entry.listed!, entry.configOverride);
      if (failure === undefined) await this.reloadEnsemblesOver(entry.name, seen);
    }
  }

  /** Code arrives over the API only where the operator allowed it (--allow-code-overrides). */
  private refuseCode(name: string, code: string | undefined): void {
    if (code !== undefined && !this.options.allowCodeOverrides) throw Errors.codeOverrideRefused(name, code, ALLOW_CODE_OVERRIDES_FLAG);
  }

  /** The repository's own config of a model; none where it cannot be read (then it runs no code). */
  private async repositoryConfig(listed: ListedModel): Promise<ModelConfig | undefined> {
    try {
      return readConfig(await listed.localize(), this.options);
    } catch {
      return undefined;
    }
  }

  /**
   * Repository extension: unloads a model; resolves once its in-flight requests have finished.
   * With `unloadDependents`, an ensemble's step models are unloaded too, after it, unless
   * another ensemble that still serves uses them (Triton's unload_dependents). For a model
   * that is not an ensemble it changes nothing.
   */
  async unload(name: string, options: UnloadOptions = {}): Promise<void> {
    if (this.options.controlMode !== 'explicit') throw Errors.unavailable(NOT_ALLOWED);
    const entry = this.table.get(name);
    if (!entry) throw Errors.invalidArg(`failed to unload '${name}', no version is available`);
    const steps = new Set([...entry.serving.values()].flatMap((s) => s.loaded.ensemble?.steps.map((step) => step.modelName) ?? []));
    const { drained } = await this.lifecycle.unload(entry, UNLOADED_REASON);
    const unloads = [drained];
    if (options.unloadDependents) {
      const stillUsed = new Set(this.table.loadedVersions().flatMap((v) => v.ensemble?.steps.map((step) => step.modelName) ?? []));
      for (const step of steps) {
        const stepEntry = this.table.get(step);
        if (stillUsed.has(step) || !stepEntry || stepEntry.serving.size === 0) continue;
        this.logger.info({ model: step, ensemble: name }, 'unload_dependents: unloading a step model of the ensemble');
        unloads.push(this.lifecycle.unload(stepEntry, `unloaded with ensemble '${name}'`).then((r) => r.drained));
      }
    }
    await Promise.all(unloads);
  }

  awaitsLoad(name: string): boolean {
    if (this.onDemand === undefined || this.table.isModelReady(name) || !this.repositories.admits(name)) return false;
    // A name the last listing did not have may be a model added since: the request looks for it (loadForRequest).
    return this.repositories.found.has(name) || !this.table.isKnown(name);
  }

  async loadForRequest(name: string, timeoutMs?: number): Promise<void> {
    if (!this.onDemand) throw Errors.modelNotReady(name, this.table.unreadyReason(name));
    // Found by the last listing, or by one look for it alone now; a name no repository has is left to
    // answer as unknown, without a load or a failure on record.
    if (!(await this.repositories.find(name))) return;
    await this.onDemand.waitFor(name, timeoutMs);
  }

  /** What loaded models take against their limits, for the metrics. */
  residencyFigures(): ResidencyFigures {
    let modelsLoaded = 0;
    for (const entry of this.table.entries()) if (entry.serving.size > 0) modelsLoaded++;
    const limits = this.residency.limits;
    return {
      modelsLoaded,
      hostBytes: this.residency.hostBytes,
      hostLimitBytes: limits.hostBytes,
      gpuBytes: this.residency.gpuBytes,
      gpuLimitBytes: limits.gpuBytesPerDevice,
    };
  }

  /** One load of the model for requests (OnDemandLoads shares it between them); resolves with why it failed. */
  private async loadForRequestNow(name: string): Promise<string | undefined> {
    const listed = await this.repositories.find(name);
    if (!listed) return `model '${name}' was not found in any model repository`;
    const entry = this.table.entryFor(name);
    // A model pinned at start-up or by a load request stays pinned when a request retries its load.
    if (!entry.wanted) entry.onDemand = true;
    return this.lifecycle.reconcile(listed, undefined, entry.serving.size === 0);
  }

  /**
   * The models that may be evicted now, with their last use: loaded for requests and serving, not
   * loading, with nothing queued, running or waiting for them, and not a step of an ensemble in use
   * (a request in flight, waiting or loading) or pinned.
   */
  private *evictable(): Iterable<{ name: string; lastUse: number }> {
    const steps = this.stepsInUse();
    for (const entry of this.table.entries()) if (this.mayEvict(entry, steps)) yield { name: entry.name, lastUse: entry.lastUse };
  }

  private mayEvict(entry: ModelEntry, stepsInUse: ReadonlySet<string>): boolean {
    if (!entry.onDemand || entry.serving.size === 0 || entry.reconciling > 0 || stepsInUse.has(entry.name)) return false;
    if ((this.onDemand?.waiters(entry.name) ?? 0) > 0) return false;
    for (const { loaded } of entry.serving.values()) if (loaded.scheduler.pendingCount > 0) return false;
    return true;
  }

  /** The models that ensembles in use, pinned or loading run as steps, steps of steps included. */
  private stepsInUse(): Set<string> {
    const used = this.lifecycle.stepsBeingLoaded();
    const visit = (loaded: LoadedVersion) => {
      for (const step of loaded.ensemble?.steps ?? []) {
        if (used.has(step.modelName)) continue;
        used.add(step.modelName);
        for (const served of this.table.get(step.modelName)?.serving.values() ?? []) visit(served.loaded);
      }
    };
    for (const name of [...used]) for (const served of this.table.get(name)?.serving.values() ?? []) visit(served.loaded);
    for (const entry of this.table.entries()) {
      const inUse = !entry.onDemand || entry.reconciling > 0 || (this.onDemand?.waiters(entry.name) ?? 0) > 0;
      for (const { loaded } of entry.serving.values()) if (loaded.ensemble && (inUse || loaded.scheduler.pendingCount > 0)) visit(loaded);
    }
    return used;
  }

  /**
   * Unloads a model loaded for requests to make room for `loading`, if it may still be evicted when
   * its turn comes; resolves once its instances have closed (true), or at once with false.
   */
  private async evict(name: string, loading: string): Promise<boolean> {
    const entry = this.table.get(name);
    if (!entry) return false;
    const lastUse = entry.lastUse;
    const reason = `evicted at ${new Date().toISOString()} to make room for '${loading}' (--model-memory-limit); loads again on its next request`;
    const evicted = await this.lifecycle.evict(entry, reason, () => this.mayEvict(entry, this.stepsInUse()));
    if (!evicted) return false;
    this.onDemand?.forget(name);
    this.options.metrics.modelEvictions.inc();
    this.logger.info({ model: name, for: loading, lastUse }, 'model evicted: the least recently used, to make room');
    await evicted.drained;
    return true;
  }

  /** Stops polling, drains and closes every loaded version. */
  async close(): Promise<void> {
    this.stopping.abort(new Error('server is shutting down'));
    if (this.polling) clearInterval(this.polling);
    await this.pollInFlight;
    this.canary.close();
    await this.lifecycle.closeAll();
  }
}
