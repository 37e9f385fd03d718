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
}

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

  constructor(
    sources: readonly ModelSource[],
    private readonly options: ModelManagerOptions,
  ) {
    this.repositories = new RepositoryScan(sources);
    this.canary = new CanaryControl({
      metrics: options.metrics,
      logger: options.logger,
      servingVersions: (model) => this.table.get(model)?.serving ?? new Map(),
    });
    this.table = new ModelTable(this.repositories, this.canary);
    // In explicit mode, loading an ensemble loads the step models that do not serve, as in Triton.
    const loadStepModel = options.controlMode === 'explicit' ? (name: string) => this.load(name) : undefined;
    this.lifecycle = new ModelLifecycle(this.table, options, this.stopping.signal, loadStepModel, this.canary);
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
    // Only the models to load are downloaded; one that fails leaves the others loading.
    const wanted =
      this.options.controlMode !== 'explicit' || this.options.startupModels.includes('*')
        ? [...found.keys(), ...duplicates]
        : [...this.options.startupModels];
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
    for (const listed of found.values()) work.push(this.lifecycle.reconcile(listed));
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
    const { drained } = await this.lifecycle.unload(entry, 'unloaded');
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

  /** Stops polling, drains and closes every loaded version. */
  async close(): Promise<void> {
    this.stopping.abort(new Error('server is shutting down'));
    if (this.polling) clearInterval(this.polling);
    await this.pollInFlight;
    this.canary.close();
    await this.lifecycle.closeAll();
  }
}
