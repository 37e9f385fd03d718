import { userInfo } from 'node:os';
import type { Logger } from 'pino';
import { RepositoryError } from '../../repository/repository-error.ts';
import {
  readConfigWithHistory,
  rollbackTarget,
  servingVersions,
  writeConfigWithHistory,
  type ConfigWithHistory,
  type PromotionRecord,
} from '../../promotion/promotion-history.ts';
import { openRepositoryStore, type RepositoryStore } from '../../promotion/repository-store.ts';
import type { S3ClientOptions } from '../../repository/s3-client.ts';
import type { ModelListing } from '../../repository/snapshot.ts';
import { CANARY_FILE } from '../../repository/canary-declaration.ts';
import { validateArtifact } from './validate-artifact.ts';

export interface RepositoryAccess {
  /** Local folder or s3:// location. */
  readonly repository: string;
  readonly logger: Logger;
  readonly s3?: S3ClientOptions;
}

export interface PromoteOptions extends RepositoryAccess {
  readonly model: string;
  /** The ONNX artifact to promote. */
  readonly file: string;
  /**
   * A config.pbtxt to serve the new version with (e.g. `batchwise tune`'s recommendation) in place
   * of the current one, in the same final rewrite; its history lines, if any, are ignored.
   * @default - the current config
   */
  readonly configText?: string;
  /** @default - $GITHUB_ACTOR (with the workflow run), else the OS user */
  readonly actor?: string;
  readonly message?: string;
}

export interface VersionChange {
  readonly model: string;
  readonly version: number;
  readonly from: number | null;
  readonly record: PromotionRecord;
}

export interface RollbackOptions extends RepositoryAccess {
  readonly model: string;
  /** Roll back to this version instead of the previous one in the history. */
  readonly toVersion?: number;
  readonly actor?: string;
  readonly message?: string;
}

export interface ModelStatus {
  readonly model: string;
  /** Versions present in the repository. */
  readonly versions: number[];
  /** Versions the config's version_policy serves. */
  readonly serving: number[];
  readonly policy: string;
  readonly history: PromotionRecord[];
  /** Why the config could not be read, if it could not. */
  readonly error?: string;
}

export function defaultActor(): string {
  const gh = process.env.GITHUB_ACTOR;
  if (gh) {
    const run = process.env.GITHUB_RUN_ID ? ` (${process.env.GITHUB_REPOSITORY ?? 'github'} run ${process.env.GITHUB_RUN_ID})` : '';
    return `${gh}${run}`;
  }
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}

export async function loadModel(store: RepositoryStore, model: string) {
  const stored = await store.readConfig(model);
  if (!stored) {
    throw new RepositoryError(
      'NOT_FOUND',
      `model '${model}' has no config.pbtxt in ${store.location}; promotion needs the model's config ` +
        `(add ${model}/config.pbtxt first, or create the model with \`models promote --config <config.pbtxt>\`)`,
    );
  }
  let parsed: ConfigWithHistory;
  try {
    parsed = readConfigWithHistory(stored.text, `${model}/config.pbtxt`);
  } catch (error) {
    throw new RepositoryError('INVALID', `config.pbtxt of '${model}' in ${store.location} is not valid: ${(error as Error).message}`);
  }
  if (parsed.config.name && parsed.config.name !== model) {
    throw new RepositoryError('INVALID', `config.pbtxt of '${model}' names the model '${parsed.config.name}'`);
  }
  const snapshot = await store.source.list();
  const listing = snapshot.models.find((m) => m.name === model);
  return { stored, parsed, listing };
}

export function presentVersions(listing: ModelListing | undefined): number[] {
  return (listing?.versions ?? []).map((v) => v.version);
}

export function single(versions: number[]): number | null {
  return versions.length === 1 ? versions[0]! : versions.length > 0 ? Math.max(...versions) : null;
}

/**
 * Validates the artifact against the model's config, pins the serving versions when the config's
 * policy would otherwise select the new one on sight, and uploads it as version max+1 (complete
 * before anything points to it). Nothing serves it yet: `models promote` and `models canary --file` go on from here.
 */
export async function uploadNextVersion(store: RepositoryStore, options: PromoteOptions) {
  const { logger, model } = options;
  const { stored, parsed, listing } = await loadModel(store, model);

  const next = options.configText === undefined ? parsed : replacedConfig(parsed, options.configText, model);
  logger.info({ model, file: options.file }, 'validating artifact in ONNX Runtime against the model config');
  const io = await validateArtifact(options.file, next.config, model);
  logger.info({ model, inputs: io.inputs.map((t) => t.name), outputs: io.outputs.map((t) => t.name) }, 'artifact is valid');

  const present = presentVersions(listing);
  const servingNow = servingVersions(parsed.config, present);
  const before = single(servingNow);
  const version = Math.max(0, ...present, ...parsed.history.map((r) => r.version)) + 1;
  let revision = stored.revision;
  // Under `latest` or `all` the upload alone would start serving the new version: first pin
  // what serves now, so that only a later rewrite moves traffic.
  if (servingNow.length > 0 && servingVersions(parsed.config, [...present, version]).includes(version)) {
    revision = await store.replaceConfig(model, writeConfigWithHistory(parsed, servingNow, parsed.history), revision);
    logger.info({ model, serving: servingNow }, `pinned '${model}' to the versions it serves before uploading version ${version}`);
  }
  const fileName = parsed.config.default_model_filename || 'model.onnx';
  const { bytes, sha256 } = await uploadVersion(store, options, version, fileName);
  return { version, before, parsed, next, revision, bytes, sha256 };
}

function uploadVersion(store: RepositoryStore, options: PromoteOptions, version: number, fileName: string) {
  const { model, file, logger } = options;
  return store.uploadVersion(model, version, fileName, file, logger).catch((error: Error) => {
    throw new RepositoryError(
      error instanceof RepositoryError ? error.code : 'INVALID',
      `uploading ${file} as version ${version} of '${model}' to ${store.location} failed: ${error.message}`,
    );
  });
}

/**
 * Validates the artifact against the model's config; pins the serving versions when the
 * config's policy would otherwise select the new one on sight; uploads it as version max+1
 * (complete before anything points to it); then rewrites config.pbtxt in one step to serve
 * exactly that version, recording the change in its history. A model the repository does not
 * have yet is created when `configText` is given (see createModel).
 */
export async function promoteModel(options: PromoteOptions): Promise<VersionChange> {
  const { logger, model } = options;
  const store = openRepositoryStore(options.repository, { logger, ...(options.s3 && { s3: options.s3 }) });
  if (options.configText !== undefined && (await store.readConfig(model)) === undefined) {
    return createModel(store, { ...options, configText: options.configText });
  }
  const { version, before, parsed, next, revision, bytes, sha256 } = await uploadNextVersion(store, options);
  logger.info({ model, version, bytes, sha256 }, 'version uploaded; switching the serving version');

  const record: PromotionRecord = {
    action: 'promote',
    version,
    from: before,
    at: new Date().toISOString(),
    actor: options.actor || defaultActor(),
    ...(options.message && { message: options.message }),
    sha256,
    bytes,
  };
  await store.replaceConfig(model, writeConfigWithHistory(next, version, [...parsed.history, record]), revision);
  await clearCanary(store, model, logger);
  logger.info({ model, version, from: before }, `model '${model}' now serves version ${version}`);
  return { model, version, from: before, record };
}

/**
 * `models promote --config` of a model that has no config.pbtxt and no version: validates the
 * artifact against that config as any promotion does, uploads it as version 1, then creates
 * config.pbtxt serving exactly it, the promotion its first history line (refused if a config
 * appeared meanwhile). The version is whole before the config names it and a failed upload leaves
 * nothing; a server polling at that moment may see version 1 without its config until the next poll.
 */
async function createModel(store: RepositoryStore, options: PromoteOptions & { readonly configText: string }): Promise<VersionChange> {
  const { logger, model } = options;
  const present = presentVersions((await store.source.list()).models.find((m) => m.name === model));
  if (present.length > 0) {
    throw new RepositoryError(
      'INVALID',
      `model '${model}' has version ${present.join(', ')} in ${store.location} but no config.pbtxt; promotion needs the model's ` +
        `config in place first (add ${model}/config.pbtxt, then promote)`,
    );
  }
  const next = newConfig(options.configText, model);
  logger.info({ model, file: options.file }, `'${model}' is not in ${store.location}: creating it with the --config given`);
  logger.info({ model, file: options.file }, 'validating artifact in ONNX Runtime against the model config');
  const io = await validateArtifact(options.file, next.config, model);
  logger.info({ model, inputs: io.inputs.map((t) => t.name), outputs: io.outputs.map((t) => t.name) }, 'artifact is valid');
  const version = 1;
  const { bytes, sha256 } = await uploadVersion(store, options, version, next.config.default_model_filename || 'model.onnx');
  logger.info({ model, version, bytes, sha256 }, 'version uploaded; writing the config that serves it');
  const record: PromotionRecord = {
    action: 'promote',
    version,
    from: null,
    at: new Date().toISOString(),
    actor: options.actor || defaultActor(),
    ...(options.message && { message: options.message }),
    sha256,
    bytes,
  };
  await store.createConfig(model, writeConfigWithHistory(next, version, [record]));
  logger.info({ model, version, from: null }, `model '${model}' now serves version ${version}`);
  return { model, version, from: null, record };
}

/** A new config (--config) as given, with its own header comments; history lines in it are ignored. */
function newConfig(text: string, model: string): ConfigWithHistory {
  let parsed: ConfigWithHistory;
  try {
    parsed = readConfigWithHistory(text, 'the --config file');
  } catch (error) {
    throw new RepositoryError('INVALID', `the new config for '${model}' is not valid: ${(error as Error).message}`);
  }
  const { config } = parsed;
  if (config.name && config.name !== model)
    throw new RepositoryError('INVALID', `the new config names the model '${config.name}', not '${model}'`);
  return { ...parsed, history: [] };
}

/** The current file's history and header comments around a new config (--config). */
function replacedConfig(current: ConfigWithHistory, text: string, model: string): ConfigWithHistory {
  return { ...current, config: newConfig(text, model).config };
}

/** Points the model back at the version that served before (or `toVersion`), in one step. */
export async function rollbackModel(options: RollbackOptions): Promise<VersionChange> {
  const { logger, model } = options;
  const store = openRepositoryStore(options.repository, { logger, ...(options.s3 && { s3: options.s3 }) });
  const { stored, parsed, listing } = await loadModel(store, model);
  const present = presentVersions(listing);
  const serving = servingVersions(parsed.config, present);
  const current = serving.length === 1 ? serving[0] : undefined;
  let target = options.toVersion;
  if (target === undefined) {
    target = rollbackTarget(parsed.history, current);
    if (target === undefined) {
      throw new RepositoryError(
        'INVALID',
        current === undefined || parsed.history.length === 0
          ? `model '${model}' has no promotion history to roll back through (serving ${serving.join(', ') || 'nothing'}); use --to <version>`
          : `no earlier version of '${model}' to roll back to from version ${current} (history: ${parsed.history.map((r) => `${r.action} ${r.version}`).join(', ')}); use --to <version>`,
      );
    }
  }
  if (!present.includes(target)) {
    throw new RepositoryError(
      'NOT_FOUND',
      `cannot roll back '${model}' to version ${target}: it is no longer in ${store.location} (present: ${present.join(', ') || 'none'})`,
    );
  }
  if (target === current) throw new RepositoryError('INVALID', `model '${model}' already serves version ${target}`);
  const record: PromotionRecord = {
    action: 'rollback',
    version: target,
    from: current ?? null,
    at: new Date().toISOString(),
    actor: options.actor || defaultActor(),
    ...(options.message && { message: options.message }),
  };
  await store.replaceConfig(model, writeConfigWithHistory(parsed, target, [...parsed.history, record]), stored.revision);
  await clearCanary(store, model, logger);
  logger.info({ model, version: target, from: current }, `model '${model}' rolled back to version ${target}`);
  return { model, version: target, from: current ?? null, record };
}

/** A promote or rollback decides what serves: a canary declaration of the model would contradict it, and goes. */
export async function clearCanary(store: RepositoryStore, model: string, logger: Logger): Promise<void> {
  if ((await store.readModelFile(model, CANARY_FILE)) === undefined) return;
  await store.removeModelFile(model, CANARY_FILE);
  logger.info({ model }, `removed the canary declaration of '${model}' (${CANARY_FILE})`);
}

function describePolicy(parsed: ConfigWithHistory): string {
  const p = parsed.config.version_policy;
  if (p?.all) return 'all';
  if (p?.specific) return `specific [${(p.specific.versions ?? []).join(', ')}]`;
  return `latest ${p?.latest?.num_versions ?? 1}`;
}

/** Versions, serving versions and promotion history of one model or all of them (one listing). */
export async function listModelStatus(options: RepositoryAccess & { readonly model?: string }): Promise<ModelStatus[]> {
  const store = openRepositoryStore(options.repository, { logger: options.logger, ...(options.s3 && { s3: options.s3 }) });
  const snapshot = await store.source.list();
  const names = options.model ? [options.model] : snapshot.models.map((m) => m.name);
  if (options.model && !snapshot.models.some((m) => m.name === options.model)) {
    throw new RepositoryError('NOT_FOUND', `model '${options.model}' not found in ${store.location}`);
  }
  return Promise.all(
    names.map(async (name): Promise<ModelStatus> => {
      const versions = presentVersions(snapshot.models.find((m) => m.name === name));
      const stored = await store.readConfig(name);
      if (!stored) return { model: name, versions, serving: versions.slice(-1), policy: 'latest 1 (no config.pbtxt)', history: [] };
      try {
        const parsed = readConfigWithHistory(stored.text, `${name}/config.pbtxt`);
        return {
          model: name,
          versions,
          serving: servingVersions(parsed.config, versions),
          policy: describePolicy(parsed),
          history: parsed.history,
        };
      } catch (error) {
        return { model: name, versions, serving: [], policy: 'unknown', history: [], error: (error as Error).message };
      }
    }),
  );
}
