import type { Logger } from 'pino';
import { parseModelConfig, printModelConfig } from '../config/index.ts';
import { modelConfigFromProtobufJson } from '../config/from-json.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { fingerprintFolder, fingerprintText } from '../repository/fingerprint.ts';
import type { ModelFolder } from '../repository/model-folder.ts';
import type { ListedModel, ModelSource } from '../repository/model-source.ts';
import { selectVersions } from '../repository/version-policy.ts';
import { withBackoff } from '../repository/backoff.ts';
import { writeOverrideModel } from '../repository/override-model.ts';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Errors, InferenceServerError, toInferenceServerError } from '../errors/errors.ts';
import { DEFAULT_FILE_OVERRIDE_MAX_BYTES, modelLoadRequestOf, type LoadParameters } from './load-parameters.ts';
import type { LoadedVersion } from './loaded-version.ts';
import { loadVersion, readConfig, type LoaderOptions } from './model-loader.ts';
import type { ModelState, RepositoryIndexEntry } from '../protocol/types.ts';

export type ModelControlMode = 'none' | 'poll' | 'explicit';

export interface ModelManagerOptions extends LoaderOptions {
  readonly controlMode: ModelControlMode;
  /** explicit mode: models loaded at start-up ('*' = all). */
  readonly startupModels: readonly string[];
  /** Largest total size of the file overrides of one load request, bytes. @default 128 MiB */
  readonly maxLoadFileBytes?: number;
}

interface ServingVersion {
  readonly loaded: LoadedVersion;
  /** Identity of what it was loaded from (config text + version folder contents). */
  readonly fingerprint: string;
  /** The model folder it was loaded from; its instances read their model file there when replaced. */
  readonly dir: string;
}

interface ModelEntry {
  readonly name: string;
  state: ModelState;
  reason: string | undefined;
  /** Whether the server is meant to serve it (readiness counts only these). */
  wanted: boolean;
  serving: Map<string, ServingVersion>;
  failedVersions: Map<string, string>;
  /** What each failed version was loaded from: not retried until it changes. */
  failedFingerprints: Map<string, string>;
  /** Where it was last found; undefined until then. */
  listed: ListedModel | undefined;
  /** Versions its policy selected at the last look (their cached files are kept). */
  selected: readonly number[];
  /** Retired versions still finishing their in-flight requests (their cached files are kept). */
  draining: Set<LoadedVersion>;
  /** Serialises loads, unloads and cache pruning of one model. */
  busy: Promise<void>;
  /** Temporary folders of file overrides, removed once no version loaded from them serves or drains. */
  overrideDirs: Set<string>;
}

/** Triton's words, in POLL and NONE mode alike (model_repository_manager.cc). */
const NOT_ALLOWED = 'explicit model load / unload is not allowed if polling is enabled';
/** Triton's MODEL_READY_REASON_DUPLICATE. */
const DUPLICATE = 'model appears in two or more repositories';

/**
 * Owns every model's lifecycle: finding models in the repositories, loading versions beside
 * the serving ones, switching traffic, draining and unloading. Knows nothing of protocols.
 */
export class ModelManager {
  private readonly models = new Map<string, ModelEntry>();
  private polling: NodeJS.Timeout | undefined;
  private readonly stopping = new AbortController();
  private pollInFlight: Promise<void> | undefined;
  /** Model names of the repositories at the last look, and those found in more than one. */
  private repositoryNames = new Set<string>();
  private duplicates = new Set<string>();
  /** Retirements running in the background. */
  private readonly draining = new Set<Promise<void>>();

  constructor(
    private readonly sources: readonly ModelSource[],
    private readonly options: ModelManagerOptions,
  ) {}

  private get logger(): Logger {
    return this.options.logger;
  }

  get controlMode(): ModelControlMode {
    return this.options.controlMode;
  }

  /** Start-up load: every model (none, poll) or the --load-model ones (explicit). */
  async start(): Promise<void> {
    // An unreachable repository at start-up is retried: the server is live, not ready, meanwhile.
    const found = await withBackoff(() => this.scan(), {
      logger: this.logger,
      what: `listing ${this.sources.map((s) => s.location).join(', ')}`,
      signal: this.stopping.signal,
    });
    // Only the models to load are downloaded; one that fails leaves the others loading.
    const wanted =
      this.options.controlMode !== 'explicit' || this.options.startupModels.includes('*')
        ? [...found.keys(), ...this.duplicates]
        : [...this.options.startupModels];
    await Promise.all(
      wanted.map(async (name) => {
        const listed = found.get(name);
        if (this.duplicates.has(name)) this.markFailed(name, DUPLICATE);
        else if (!listed) this.markFailed(name, `model '${name}' was not found in any model repository`);
        else await this.reconcile(listed);
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
      found = await this.scan();
    } catch (error) {
      this.logger.warn({ err: toInferenceServerError(error).message }, 'repository poll failed; serving continues');
      return;
    }
    const work: Promise<unknown>[] = [];
    for (const listed of found.values()) work.push(this.reconcile(listed));
    for (const entry of this.models.values()) {
      if (entry.wanted && entry.listed && !found.has(entry.name)) {
        const reason = this.duplicates.has(entry.name) ? DUPLICATE : 'removed from the repository';
        if (reason === DUPLICATE) this.logger.error({ model: entry.name }, `failed to poll model '${entry.name}': not unique across all model repositories`);
        work.push(this.unloadEntry(entry, reason));
      }
    }
    await Promise.all(work);
  }

  /**
   * Repository extension: load (or reload) a model, optionally with a JSON config override and
   * file overrides. With file overrides the model loads from a temporary folder holding only
   * them and the config, as in Triton, whether or not the repositories have the model.
   */
  async load(name: string, parameters: LoadParameters = {}): Promise<void> {
    if (this.options.controlMode !== 'explicit') throw Errors.unavailable(NOT_ALLOWED);
    const request = modelLoadRequestOf(parameters, this.options.maxLoadFileBytes ?? DEFAULT_FILE_OVERRIDE_MAX_BYTES);
    const override = request.config === undefined ? undefined : configFromJson(name, request.config);
    let listed: ListedModel;
    if (override && request.files.size > 0) {
      const written = await writeOverrideModel(name, printModelConfig(override), request.files);
      this.entryFor(name).overrideDirs.add(written.dir);
      listed = written.listed;
    } else {
      const found = await this.scan();
      if (this.duplicates.has(name)) throw Errors.invalidArg(`failed to load '${name}': ${DUPLICATE}`);
      const repositoryModel = found.get(name);
      if (!repositoryModel) throw Errors.invalidArg(`failed to load '${name}': model '${name}' was not found in any model repository`);
      listed = repositoryModel;
    }
    const failure = await this.reconcile(listed, override, true);
    // The files of an override that did not load, or that this load replaced, go once unused.
    this.schedulePrune(this.entryFor(name));
    if (failure !== undefined) throw Errors.invalidArg(`failed to load '${name}': ${failure}`);
  }

  /** Unloads a model; resolves once its in-flight requests have finished. */
  async unload(name: string): Promise<void> {
    if (this.options.controlMode !== 'explicit') throw Errors.unavailable(NOT_ALLOWED);
    const entry = this.models.get(name);
    if (!entry) throw Errors.invalidArg(`failed to unload '${name}', no version is available`);
    const { drained } = await this.unloadEntry(entry, 'unloaded');
    await drained;
  }

  /** One look at every repository: model folders by name, nothing downloaded. A name found twice is left out. */
  private async scan(): Promise<Map<string, ListedModel>> {
    const found = new Map<string, ListedModel>();
    const duplicates = new Set<string>();
    for (const source of this.sources) {
      for (const listed of await source.listModels()) {
        if (found.has(listed.name)) duplicates.add(listed.name);
        found.set(listed.name, listed);
      }
    }
    for (const name of duplicates) found.delete(name);
    this.repositoryNames = new Set([...found.keys(), ...duplicates]);
    this.duplicates = duplicates;
    return found;
  }

  /** Serialised per model: two loads of one model never interleave. Resolves with why it failed, if it did. */
  private reconcile(listed: ListedModel, override?: ModelConfig, forceReload = false): Promise<string | undefined> {
    const entry = this.entryFor(listed.name);
    const run = entry.busy.then(() => this.reconcileNow(entry, listed, override, forceReload));
    entry.busy = run.then(() => undefined, () => undefined);
    return run;
  }

  /**
   * Loads the versions the policy selects that are new or changed, beside the serving ones;
   * switches traffic to them; then drains and closes what they replace. A version that fails
   * leaves whatever serves untouched.
   */
  private async reconcileNow(
    entry: ModelEntry, listed: ListedModel, override: ModelConfig | undefined, forceReload: boolean,
  ): Promise<string | undefined> {
    const started = process.hrtime.bigint();
    entry.listed = listed;
    entry.wanted = true;
    let folder: ModelFolder;
    let written: ModelConfig | undefined;
    let wanted: number[];
    try {
      folder = await listed.localize();
      written = override ?? readConfig(folder, this.options);
      wanted = selectVersions(folder.versions, written?.version_policy);
      if (wanted.length === 0) throw Errors.invalidArg(`model '${folder.name}' has no version folder that its version policy selects`);
    } catch (error) {
      return this.recordFailure(entry, toInferenceServerError(error).message);
    }
    entry.selected = wanted;
    const configPrint = override ? printModelConfig(override) : folder.configText;
    const fingerprints = await Promise.all(
      wanted.map(async (v) => `${fingerprintText(configPrint)}:${await fingerprintFolder(join(folder.dir, String(v))).catch(() => 'missing')}`),
    );
    const unchangedFailure = (v: number, i: number) => !forceReload && entry.failedFingerprints.get(String(v)) === fingerprints[i];
    const toLoad = wanted.filter(
      (v, i) => (forceReload || entry.serving.get(String(v))?.fingerprint !== fingerprints[i]) && !unchangedFailure(v, i),
    );
    // Nothing new to try: the earlier failure stays reported and nothing is reloaded.
    if (toLoad.length === 0 && wanted.some(unchangedFailure)) return entry.reason;

    if (entry.serving.size === 0) entry.state = 'LOADING';
    const results = await Promise.allSettled(toLoad.map((v) => loadVersion(folder, written, v, this.options)));
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
          instance.onFatal = (error) => void this.failServingVersion(entry, result.value, error.message);
        }
      }
      else {
        failed.set(key, toInferenceServerError(result.reason).message);
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
    entry.serving = next;
    entry.failedVersions = failed;
    entry.failedFingerprints = failedFingerprints;
    entry.state = next.size > 0 ? 'READY' : 'UNAVAILABLE';
    entry.reason = failed.size > 0 ? [...failed.entries()].map(([v, r]) => `version ${v}: ${r}`).join('; ') : undefined;
    this.reportLoadState(entry);

    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    for (const { loaded } of next.values()) {
      if (!toLoad.includes(Number(loaded.version)) || failed.has(loaded.version)) continue;
      this.options.metrics.modelLoadDurationSeconds.labels({ model: loaded.modelName, version: loaded.version }).set(seconds);
      this.options.metrics.modelState
        .labels({ model: loaded.modelName, version: loaded.version, execution_provider: loaded.executionProvider })
        .set(1);
      this.logger.info(
        { model: loaded.modelName, version: loaded.version, executionProvider: loaded.executionProvider, instances: loaded.instances.length, loadSeconds: seconds },
        'model version ready',
      );
    }
    void this.retireInBackground(entry, retired.map((s) => s.loaded));
    if (failed.size > 0) return [...failed.values()].join('; ');
    return next.size === 0 ? (entry.reason ?? 'no version loaded') : undefined;
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

  private recordFailure(entry: ModelEntry, reason: string): string {
    entry.reason = reason;
    this.reportLoadState(entry);
    if (entry.serving.size === 0) entry.state = 'UNAVAILABLE';
    this.logger.error({ model: entry.name, reason, stillServing: [...entry.serving.keys()] }, 'model failed to load');
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

  private markFailed(name: string, reason: string): void {
    const entry = this.entryFor(name);
    entry.wanted = true;
    this.recordFailure(entry, reason);
  }

  /** Stops serving the model at once; `drained` resolves when its in-flight requests have finished. */
  private unloadEntry(entry: ModelEntry, reason: string): Promise<{ drained: Promise<void> }> {
    const run = entry.busy.then(() => {
      const retired = [...entry.serving.values()].map((s) => s.loaded);
      entry.serving = new Map();
      entry.failedVersions = new Map();
      entry.failedFingerprints = new Map();
      entry.selected = [];
      entry.state = 'UNAVAILABLE';
      entry.reason = reason;
      entry.wanted = false;
      this.reportLoadState(entry);
      this.logger.info({ model: entry.name, reason }, 'model unloaded');
      return { drained: this.retireInBackground(entry, retired) };
    });
    entry.busy = run.then(() => undefined, () => undefined);
    return run;
  }

  private entryFor(name: string): ModelEntry {
    let entry = this.models.get(name);
    if (!entry) {
      entry = {
        name, state: 'UNKNOWN', reason: undefined, wanted: false, serving: new Map(), failedVersions: new Map(),
        failedFingerprints: new Map(), listed: undefined, selected: [], draining: new Set(), busy: Promise.resolve(),
        overrideDirs: new Set(),
      };
      this.models.set(name, entry);
    }
    return entry;
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
        (error: unknown) => this.logger.warn({ model: entry.name, err: toInferenceServerError(error).message }, 'closing a retired model version failed'),
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
  private schedulePrune(entry: ModelEntry): void {
    entry.busy = entry.busy.then(async () => {
      if (entry.draining.size > 0 || this.stopping.signal.aborted) return;
      await this.removeOverrideDirs(entry, new Set([...entry.serving.values()].map((s) => s.dir)));
      const listed = entry.listed;
      if (!listed) return;
      const keep = new Set([...entry.selected, ...[...entry.serving.keys()].map(Number)]);
      await listed.prune([...keep]).catch((error: unknown) =>
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
    await version.scheduler.drain();
    await Promise.all(version.instances.map((i) => i.close()));
  }

  /** The version a request addresses: the given one, or the highest ready one. Throws Triton's errors. */
  resolve(modelName: string, modelVersion?: string): LoadedVersion {
    const entry = this.models.get(modelName);
    if (!entry) throw Errors.unknownModel(modelName);
    if (modelVersion !== undefined && modelVersion !== '') {
      const v = entry.serving.get(modelVersion);
      if (!v) throw Errors.unknownVersion(modelName, modelVersion);
      return v.loaded;
    }
    let best: LoadedVersion | undefined;
    for (const { loaded } of entry.serving.values()) if (!best || Number(loaded.version) > Number(best.version)) best = loaded;
    if (!best) throw Errors.modelNotReady(modelName, entry.reason);
    return best;
  }

  isKnown(modelName: string): boolean {
    return this.models.has(modelName);
  }

  isModelReady(modelName: string, modelVersion?: string): boolean {
    const entry = this.models.get(modelName);
    if (!entry || entry.serving.size === 0) return false;
    if (modelVersion !== undefined && modelVersion !== '') return entry.serving.has(modelVersion);
    return true;
  }

  readyVersions(modelName: string): string[] {
    const entry = this.models.get(modelName);
    if (!entry) return [];
    return [...entry.serving.keys()].sort((a, b) => Number(a) - Number(b));
  }

  /** Ready when every model the server is meant to serve has a ready version. */
  allReady(): boolean {
    for (const entry of this.models.values()) if (entry.wanted && entry.state !== 'READY') return false;
    return true;
  }

  configOf(modelName: string, modelVersion?: string): ModelConfig {
    return this.resolve(modelName, modelVersion).config;
  }

  loadedVersions(): LoadedVersion[] {
    return [...this.models.values()].flatMap((e) => [...e.serving.values()].map((s) => s.loaded));
  }

  /**
   * Triton's repository index: every model of the repositories at the last look (name only
   * when never loaded), each version with its state; `readyOnly` keeps the READY rows.
   */
  index(readyOnly: boolean): RepositoryIndexEntry[] {
    const rows: RepositoryIndexEntry[] = [];
    const names = [...new Set([...this.repositoryNames, ...this.models.keys()])].sort((a, b) => a.localeCompare(b));
    for (const name of names) {
      const entry = this.models.get(name);
      if (this.duplicates.has(name) || !entry) {
        if (!readyOnly) rows.push(this.duplicates.has(name) ? { name, state: 'UNAVAILABLE', reason: DUPLICATE } : { name });
        continue;
      }
      for (const version of entry.serving.keys()) rows.push({ name: entry.name, version, state: 'READY', reason: '' });
      if (readyOnly) continue;
      for (const [version, reason] of entry.failedVersions) {
        if (!entry.serving.has(version)) rows.push({ name: entry.name, version, state: 'UNAVAILABLE', reason });
      }
      if (entry.serving.size === 0 && entry.failedVersions.size === 0) {
        rows.push({ name: entry.name, state: entry.state, reason: entry.reason ?? '' });
      } else if (entry.serving.size > 0 && entry.reason && entry.failedVersions.size === 0) {
        // A config that no longer parses: the old version serves on, and the index says why nothing newer does.
        rows.push({ name: entry.name, state: 'UNAVAILABLE', reason: entry.reason });
      }
    }
    return rows;
  }

  /** Stops polling, drains and closes every loaded version. */
  async close(): Promise<void> {
    this.stopping.abort(new Error('server is shutting down'));
    if (this.polling) clearInterval(this.polling);
    await this.pollInFlight;
    const all = this.loadedVersions();
    for (const entry of this.models.values()) entry.serving = new Map();
    await Promise.all([...all.map((v) => this.retire(undefined, v)), ...this.draining]);
    await Promise.all([...this.models.values()].map((entry) => this.removeOverrideDirs(entry, new Set())));
  }
}

/** The repository extension's config override: model configuration JSON, checked like config.pbtxt. */
function configFromJson(name: string, json: string): ModelConfig {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    throw Errors.invalidArg(`failed to load '${name}': the config parameter is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw Errors.invalidArg(`failed to load '${name}': the config parameter must be a JSON object`);
  }
  try {
    const fields = modelConfigFromProtobufJson(parsed as Record<string, unknown>);
    return parseModelConfig(printModelConfig({ input: [], output: [], max_batch_size: 0, ...fields, name } as ModelConfig), `${name} (load config override)`);
  } catch (error) {
    if (error instanceof InferenceServerError) throw Errors.invalidArg(`failed to load '${name}': ${error.message}`);
    throw error;
  }
}
