import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { isEnsembleConfig, planEnsemble, printModelConfig } from '../config/index.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { Errors, toInferenceServerError } from '../errors/errors.ts';
import { fingerprintFolder, fingerprintText } from '../repository/fingerprint.ts';
import type { ModelFolder } from '../repository/model-folder.ts';
import type { ListedModel } from '../repository/model-source.ts';
import { selectVersions } from '../repository/version-policy.ts';
import type { LoadedVersion } from './loaded-version.ts';
import type { ModelEntry, ServingVersion } from './model-entry.ts';
import { loadEnsembleVersion } from './ensemble-loader.ts';
import { loadVersion, readConfig, type LoaderOptions } from './model-loader.ts';
import type { ModelTable } from './model-registry.ts';
import type { CanaryControl } from './canary-control.ts';
import { readCanaryDeclaration } from '../repository/canary-declaration.ts';

/** Why a load failed, as the repository index and the API show it: model-relative paths only. */
function reasonOf(listed: ListedModel, error: unknown): string {
  return listed.modelRelative(toInferenceServerError(error).message);
}

function secondsSince(startNs: bigint): number {
  return Number(process.hrtime.bigint() - startNs) / 1e9;
}

/** The policy's versions and those a canary declaration adds, ascending. */
function withCanaryVersions(selected: readonly number[], declared: readonly number[]): number[] {
  return [...new Set([...selected, ...declared])].sort((a, b) => a - b);
}

/**
 * The per-version state machine of every model: loads versions beside the serving ones,
 * switches traffic to them, fails a version whose instances keep crashing, drains and closes
 * what is retired, and prunes the local cache. Work on one model is serialised (entry.busy).
 */
export class ModelLifecycle {
  /** Retirements running in the background. */
  private readonly draining = new Set<Promise<void>>();
  /** Ensembles waiting for their step models to load, and those models (to see a cycle instead of waiting forever). */
  private readonly waitsFor = new Map<string, readonly string[]>();

  constructor(
    private readonly table: ModelTable,
    private readonly options: LoaderOptions,
    private readonly stopping: AbortSignal,
    /** explicit mode: loads an ensemble's step model that does not serve (loading an ensemble loads its steps). */
    private readonly loadStepModel?: (name: string) => Promise<unknown>,
    /** Canary releases: told each model's declaration at every look. */
    private readonly canary?: CanaryControl,
  ) {}

  private get logger(): Logger {
    return this.options.logger;
  }

  /** The step models of the ensembles loading now (they wait for them): not to be evicted meanwhile. */
  stepsBeingLoaded(): Set<string> {
    return new Set([...this.waitsFor.values()].flat());
  }

  /** Serialised per model: two loads of one model never interleave. Resolves with why it failed, if it did. */
  reconcile(listed: ListedModel, override?: ModelConfig, forceReload = false): Promise<string | undefined> {
    const entry = this.table.entryFor(listed.name);
    entry.reconciling++;
    const run = entry.busy.then(() => this.reconcileNow(entry, listed, override, forceReload)).finally(() => entry.reconciling--);
    entry.busy = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /**
   * Loads the versions the policy selects that are new or changed, beside the serving ones;
   * switches traffic to them; then drains and closes what they replace. A version that fails
   * leaves whatever serves untouched.
   */
  private async reconcileNow(
    entry: ModelEntry,
    listed: ListedModel,
    override: ModelConfig | undefined,
    forceReload: boolean,
  ): Promise<string | undefined> {
    const started = process.hrtime.bigint();
    entry.listed = listed;
    entry.wanted = true;
    let folder: ModelFolder;
    let written: ModelConfig | undefined;
    let wanted: number[];
    let downloadSeconds: number;
    try {
      folder = await listed.localize();
      downloadSeconds = secondsSince(started);
      written = override ?? readConfig(folder, this.options);
      wanted = withCanaryVersions(selectVersions(folder.versions, written?.version_policy), await this.canaryOf(entry, folder));
      if (wanted.length === 0) throw Errors.invalidArg(`model '${folder.name}' has no version folder that its version policy selects`);
    } catch (error) {
      // A poll that finds the same failure (an unchanged broken config) says so once, not at every poll.
      return this.recordFailure(entry, reasonOf(listed, error), forceReload);
    }
    entry.selected = wanted;
    const ensemble = isEnsembleConfig(written) ? await this.settleSteps(entry.name, written!) : undefined;
    // An ensemble is checked against its steps' models: it loads again when they change.
    const writtenText = override ? printModelConfig(override) : folder.configText;
    const configPrint = ensemble ? `${writtenText}${ensemble.stepsFingerprint}` : writtenText;
    const fingerprints = await Promise.all(
      wanted.map(
        async (v) => `${fingerprintText(configPrint)}:${await fingerprintFolder(join(folder.dir, String(v))).catch(() => 'missing')}`,
      ),
    );
    const unchangedFailure = (v: number, i: number) => !forceReload && entry.failedFingerprints.get(String(v)) === fingerprints[i];
    const toLoad = wanted.filter(
      (v, i) => (forceReload || entry.serving.get(String(v))?.fingerprint !== fingerprints[i]) && !unchangedFailure(v, i),
    );
    // Nothing new to try: the earlier failure stays reported and nothing is reloaded.
    if (toLoad.length === 0 && wanted.some(unchangedFailure)) return entry.reason;

    if (entry.serving.size === 0) entry.state = 'LOADING';
    // A load's phases apart: the files into the local cache (S3) here, room and instances in the loader.
    if (toLoad.length > 0) this.options.metrics.modelLoadDurationByPhase.observe({ phase: 'download' }, downloadSeconds);
    const results = await Promise.allSettled(
      toLoad.map((v) =>
        ensemble ? loadEnsembleVersion(folder, written!, v, this.options, this.table) : loadVersion(folder, written, v, this.options),
      ),
    );
    const failed = new Map<string, string>();
    const failedFingerprints = new Map<string, string>();
    const next = new Map<string, ServingVersion>();
    for (const v of wanted) {
      const key = String(v);
      const i = toLoad.indexOf(v);
      if (i < 0) {
        next.set(key, entry.serving.get(key)!);
        continue;
      }
      const result = results[i]!;
      if (result.status === 'fulfilled') {
        next.set(key, { loaded: result.value, fingerprint: fingerprints[wanted.indexOf(v)]!, dir: folder.dir });
        for (const instance of result.value.instances) {
          instance.onFatal = (error) => void this.failServingVersion(entry, result.value, reasonOf(listed, error));
        }
      } else {
        failed.set(key, reasonOf(listed, result.reason));
        failedFingerprints.set(key, fingerprints[wanted.indexOf(v)]!);
      }
    }
    for (const [version, reason] of failed) {
      this.logger.error({ model: folder.name, version, reason }, 'model version failed to load');
      this.options.metrics.modelLoadFailures.labels({ model: folder.name, version }).inc();
      // Keep serving what served before under this version number, or any old version, rather than nothing.
      const previous = entry.serving.get(version);
      if (previous) next.set(version, previous);
    }
    if (next.size === 0 && entry.serving.size > 0) {
      for (const [version, served] of entry.serving) next.set(version, served);
    }
    const retired = [...entry.serving.values()].filter((s) => ![...next.values()].includes(s));
    // A version the reload retired keeps its row in the index (UNLOADING, then unloaded), as in Triton.
    entry.unloadedVersions = withVersions(
      entry.unloadedVersions,
      retired.map((s) => s.loaded.version),
    ).filter((v) => !next.has(v) && !failed.has(v));
    if (results.some((r) => r.status === 'fulfilled')) entry.configOverride = override;
    entry.serving = next;
    entry.failedVersions = failed;
    entry.failedFingerprints = failedFingerprints;
    entry.state = next.size > 0 ? 'READY' : 'UNAVAILABLE';
    entry.reason = failed.size > 0 ? [...failed.entries()].map(([v, r]) => `version ${v}: ${r}`).join('; ') : undefined;
    this.reportLoadState(entry);

    const seconds = secondsSince(started);
    if (next.size > 0) this.table.touch(entry);
    for (const { loaded } of next.values()) {
      if (!toLoad.includes(Number(loaded.version)) || failed.has(loaded.version)) continue;
      this.options.metrics.modelLoads.inc();
      this.options.metrics.modelLoadDurationSeconds.labels({ model: loaded.modelName, version: loaded.version }).set(seconds);
      this.options.metrics.modelState
        .labels({ model: loaded.modelName, version: loaded.version, execution_provider: loaded.executionProvider })
        .set(1);
      this.logger.info(
        {
          model: loaded.modelName,
          version: loaded.version,
          executionProvider: loaded.executionProvider,
          instances: loaded.instances.length,
          loadSeconds: seconds,
        },
        'model version ready',
      );
    }
    void this.retireInBackground(
      entry,
      retired.map((s) => s.loaded),
    );
    // Nothing of it serves: its cached versions are no longer held (a cache with a disk limit may delete them).
    if (next.size === 0) this.schedulePrune(entry);
    if (failed.size > 0) return [...failed.values()].join('; ');
    return next.size === 0 ? (entry.reason ?? 'no version loaded') : undefined;
  }

  /**
   * Before an ensemble loads, its step models finish whatever load is under way (the start-up
   * load and polls load every model at once) and, in explicit mode, those that do not serve
   * are loaded. Resolves with what the steps serve, for the ensemble's fingerprint. An ensemble
   * whose steps lead back to it does not wait for them: its load fails, naming the cycle.
   */
  private async settleSteps(ensemble: string, config: ModelConfig): Promise<{ stepsFingerprint: string }> {
    let steps: string[];
    try {
      steps = [...new Set(planEnsemble({ ...config, name: ensemble }).steps.map((s) => s.modelName))];
    } catch {
      return { stepsFingerprint: '' }; // the load reports what is wrong with the config
    }
    this.waitsFor.set(ensemble, steps);
    try {
      for (const step of steps) {
        if (this.waitLeadsTo(step, ensemble, new Set())) continue;
        await this.table.get(step)?.busy;
        if (this.loadStepModel && !this.table.isModelReady(step)) await this.loadStepModel(step).catch(() => undefined);
      }
    } finally {
      this.waitsFor.delete(ensemble);
    }
    const serving = steps.map((step) => {
      const versions = [...(this.table.get(step)?.serving ?? new Map<string, ServingVersion>())];
      return `${step}=${versions.map(([v, s]) => `${v}:${s.fingerprint}`).join(',')}`;
    });
    return { stepsFingerprint: `\nsteps:${serving.join(';')}` };
  }

  private waitLeadsTo(from: string, to: string, seen: Set<string>): boolean {
    if (from === to) return true;
    if (seen.has(from)) return false;
    seen.add(from);
    return (this.waitsFor.get(from) ?? []).some((next) => this.waitLeadsTo(next, to, seen));
  }

  /**
   * The model folder's canary declaration, applied to the split at once (no version reloads for
   * it: canary.json is not part of any version's fingerprint). An invalid one is logged and the
   * split in force stays. Resolves with the versions it asks to serve beside the policy's, those present.
   */
  private async canaryOf(entry: ModelEntry, folder: ModelFolder): Promise<number[]> {
    if (!this.canary) return [];
    let found: Awaited<ReturnType<typeof readCanaryDeclaration>>;
    try {
      found = await readCanaryDeclaration(folder.dir);
    } catch (error) {
      const reason = toInferenceServerError(error).message;
      if (entry.canaryError !== reason)
        this.logger.error({ model: entry.name, reason }, 'invalid canary declaration; the split in force stays');
      entry.canaryError = reason;
      return this.canary.versionsInForce(entry.name).filter((v) => folder.versions.includes(v));
    }
    entry.canaryError = undefined;
    this.canary.apply(entry.name, found);
    if (!found) return [];
    const declared = [Number(found.declaration.stableVersion), Number(found.declaration.canaryVersion)];
    const missing = declared.filter((v) => !folder.versions.includes(v));
    if (missing.length > 0) {
      this.logger.error({ model: entry.name, missing }, 'canary declaration names versions the repository does not have');
    }
    return declared.filter((v) => folder.versions.includes(v));
  }

  /** An instance gave up after repeated crashes: the version stops serving, with the reason. */
  private async failServingVersion(entry: ModelEntry, version: LoadedVersion, reason: string): Promise<void> {
    const serving = entry.serving.get(version.version);
    if (serving?.loaded !== version) return;
    entry.serving.delete(version.version);
    entry.failedVersions.set(version.version, reason);
    entry.failedFingerprints.set(version.version, serving.fingerprint);
    entry.reason = `version ${version.version}: ${reason}`;
    this.reportLoadState(entry);
    if (entry.serving.size === 0) entry.state = 'UNAVAILABLE';
    this.logger.error({ model: entry.name, version: version.version, reason }, 'model version unavailable after repeated instance crashes');
    await this.retireInBackground(entry, [version]);
  }

  /**
   * Records why the model cannot load. Logged as an error when the failure is new (the first, or
   * another reason than the one on record) or `always` (a load asked for over the API); the same
   * failure found again by a poll is logged at debug only.
   */
  private recordFailure(entry: ModelEntry, reason: string, always = true): string {
    const unchanged = !always && entry.reason === reason;
    entry.reason = reason;
    this.reportLoadState(entry);
    if (entry.serving.size === 0) entry.state = 'UNAVAILABLE';
    const fields = { model: entry.name, reason, stillServing: [...entry.serving.keys()] };
    if (unchanged) this.logger.debug(fields, 'model still fails to load, for the same reason');
    else this.logger.error(fields, 'model failed to load');
    return reason;
  }

  /**
   * batchwise_model_load_failed: 1 while a model the server should serve has a failure on
   * record (a selected version that did not load, instances that crashed until it stopped
   * serving, a config or download that failed), whether or not an older version still serves;
   * 0 once a load clears it or the model is unloaded.
   */
  private reportLoadState(entry: ModelEntry): void {
    this.options.metrics.modelLoadFailed.labels({ model: entry.name }).set(entry.wanted && entry.reason !== undefined ? 1 : 0);
  }

  /** A model the server should serve and cannot even try to load (not found, found twice). */
  markFailed(name: string, reason: string): void {
    const entry = this.table.entryFor(name);
    entry.wanted = true;
    entry.unloadedVersions = [];
    this.recordFailure(entry, reason);
  }

  /** Stops serving the model at once; `drained` resolves when its in-flight requests have finished. */
  unload(entry: ModelEntry, reason: string): Promise<{ drained: Promise<void> }> {
    const run = entry.busy.then(() => this.detach(entry, reason));
    entry.busy = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /**
   * Eviction (--model-memory-limit): unloads the model when its turn comes in its queue of work, if
   * `stillEvictable()` says so then. The check and the unload run in one turn of the event loop after
   * every promise continuation pending, so a request that was handed a version of the model (it
   * resolved it, or its wait for the load ended) has reached the version's queue, where it is seen
   * (Scheduler.pendingCount), and one that comes later waits for the model to load again: eviction
   * never fails a request. Resolves as unload() does once it is unloaded, or with undefined if it stayed.
   */
  evict(entry: ModelEntry, reason: string, stillEvictable: () => boolean): Promise<{ drained: Promise<void> } | undefined> {
    const run = entry.busy.then(
      () =>
        new Promise<{ drained: Promise<void> } | undefined>((resolve) =>
          setImmediate(() => resolve(!this.stopping.aborted && stillEvictable() ? this.detach(entry, reason) : undefined)),
        ),
    );
    entry.busy = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private detach(entry: ModelEntry, reason: string): { drained: Promise<void> } {
    const retired = [...entry.serving.values()].map((s) => s.loaded);
    entry.unloadedVersions = withVersions(
      entry.unloadedVersions,
      retired.map((v) => v.version),
    );
    entry.serving = new Map();
    entry.failedVersions = new Map();
    entry.failedFingerprints = new Map();
    entry.selected = [];
    entry.state = 'UNAVAILABLE';
    entry.reason = reason;
    entry.wanted = false;
    this.canary?.apply(entry.name, undefined);
    this.reportLoadState(entry);
    this.logger.info({ model: entry.name, reason }, 'model unloaded');
    return { drained: this.retireInBackground(entry, retired) };
  }

  /**
   * Retires versions that no longer serve without holding up the caller: they finish their
   * in-flight requests and close; then the cache drops files no loaded version reads.
   */
  private retireInBackground(entry: ModelEntry, versions: readonly LoadedVersion[]): Promise<void> {
    for (const version of versions) entry.draining.add(version);
    const done: Promise<void> = Promise.all(versions.map((v) => this.retire(entry, v)))
      .then(
        () => undefined,
        (error: unknown) =>
          this.logger.warn({ model: entry.name, err: toInferenceServerError(error).message }, 'closing a retired model version failed'),
      )
      .finally(() => {
        for (const version of versions) entry.draining.delete(version);
        this.draining.delete(done);
        this.schedulePrune(entry);
      });
    this.draining.add(done);
    return done;
  }

  /**
   * Removes cached versions that nothing selects, serves or drains, and file override folders
   * no serving version was loaded from; in the model's queue of work.
   */
  schedulePrune(entry: ModelEntry): void {
    entry.busy = entry.busy.then(async () => {
      if (entry.draining.size > 0 || this.stopping.aborted) return;
      await this.removeOverrideDirs(entry, new Set([...entry.serving.values()].map((s) => s.dir)));
      const listed = entry.listed;
      if (!listed) return;
      const loaded = [...entry.serving.keys()].map(Number);
      const keep = new Set([...entry.selected, ...loaded]);
      await listed
        .prune([...keep], loaded)
        .catch((error: unknown) =>
          this.logger.warn({ model: entry.name, err: toInferenceServerError(error).message }, 'pruning the local model cache failed'),
        );
    });
  }

  private async removeOverrideDirs(entry: ModelEntry, inUse: ReadonlySet<string>): Promise<void> {
    for (const dir of entry.overrideDirs) {
      if (inUse.has(dir)) continue;
      entry.overrideDirs.delete(dir);
      await rm(dir, { recursive: true, force: true }).catch((error: unknown) =>
        this.logger.warn({ model: entry.name, dir, err: toInferenceServerError(error).message }, 'removing a file override folder failed'),
      );
    }
  }

  /** Lets in-flight requests finish, then closes the instances. */
  private async retire(entry: ModelEntry | undefined, version: LoadedVersion): Promise<void> {
    const successor = entry?.serving.get(version.version)?.loaded;
    // A version reloaded in place (new config) shares the series; its successor set it to 1 already.
    if (successor === undefined || successor === version || successor.executionProvider !== version.executionProvider) {
      this.options.metrics.modelState
        .labels({ model: version.modelName, version: version.version, execution_provider: version.executionProvider })
        .set(0);
    }
    // New sequences are refused from now on; requests of those in flight still run (they drain).
    version.scheduler.stop?.();
    await version.scheduler.drain();
    version.scheduler.close?.();
    await Promise.all(version.instances.map((i) => i.close()));
  }

  /** Shutdown: drains and closes every loaded version and waits for retirements; removes every override folder. */
  async closeAll(): Promise<void> {
    const all = this.table.loadedVersions();
    for (const entry of this.table.entries()) entry.serving = new Map();
    await Promise.all([...all.map((v) => this.retire(undefined, v)), ...this.draining]);
    await Promise.all([...this.table.entries()].map((entry) => this.removeOverrideDirs(entry, new Set())));
  }
}

/** Version numbers of both lists, once each, ascending. */
function withVersions(a: readonly string[], b: readonly string[]): string[] {
  return [...new Set([...a, ...b])].sort((x, y) => Number(x) - Number(y));
}
