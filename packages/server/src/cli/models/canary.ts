import { writeConfigWithHistory, servingVersions, type PromotionRecord } from '../../promotion/promotion-history.ts';
import { openRepositoryStore, type RepositoryStore } from '../../promotion/repository-store.ts';
import {
  CANARY_FILE,
  DEFAULT_ROLLBACK,
  parseCanaryDeclaration,
  printCanaryDeclaration,
  type CanaryDeclaration,
  type CanaryRollbackThresholds,
  type StickinessSource,
} from '../../repository/canary-declaration.ts';
import { RepositoryError } from '../../repository/repository-error.ts';
import { figuresBetween, judgeCanary } from '../../metrics/canary-judge.ts';
import type { CanaryReading, FiguresSource } from './canary-figures.ts';
import {
  defaultActor,
  loadModel,
  presentVersions,
  single,
  uploadNextVersion,
  type RepositoryAccess,
  type VersionChange,
} from './promotion.ts';

export interface CanaryOptions extends RepositoryAccess {
  readonly model: string;
  /** The canary version (present in the repository). */
  readonly version: number;
  /** Percent of unversioned requests for the canary, 0..100. */
  readonly weight: number;
  /** @default 'header' */
  readonly stickiness?: StickinessSource;
  /** @default DEFAULT_ROLLBACK, field by field */
  readonly rollback?: Partial<CanaryRollbackThresholds>;
}

export interface CanaryStepsOptions extends Omit<CanaryOptions, 'weight'> {
  /** Weights in order, e.g. [5, 25, 50, 100]; 100 last finishes the release as `models promote` would. */
  readonly steps: readonly number[];
  /** How long each step is watched, milliseconds. */
  readonly intervalMs: number;
  readonly source: FiguresSource;
  /** One line per step event. */
  readonly progress: (line: string) => void;
  readonly actor?: string;
  readonly message?: string;
  /** @default a timer */
  readonly sleep?: (ms: number) => Promise<void>;
}

/** A step found the canary worse (or a server rolled it back): the declaration is at weight 0. */
export class CanaryRolledBackError extends Error {
  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
  }
}

/**
 * Writes the model's canary declaration: `version` at `weight` beside the version that serves now
 * (or the stable version of a declaration already there). Nothing reloads on the servers.
 */
export async function startCanary(options: CanaryOptions): Promise<CanaryDeclaration> {
  const store = openRepositoryStore(options.repository, { logger: options.logger, ...(options.s3 && { s3: options.s3 }) });
  return writeDeclaration(store, options, options.weight);
}

async function writeDeclaration(
  store: RepositoryStore,
  options: Omit<CanaryOptions, 'weight'>,
  weight: number,
): Promise<CanaryDeclaration> {
  const { model, logger } = options;
  const { parsed, listing } = await loadModel(store, model);
  const present = presentVersions(listing);
  const existingText = await store.readModelFile(model, CANARY_FILE);
  const existing = existingText === undefined ? undefined : parseCanaryDeclaration(existingText, `${model}/${CANARY_FILE}`);
  const canaryVersion = String(options.version);
  const stable =
    existing?.canaryVersion === canaryVersion ? Number(existing.stableVersion) : single(servingVersions(parsed.config, present));
  if (!present.includes(options.version)) {
    throw new RepositoryError(
      'NOT_FOUND',
      `model '${model}' has no version ${options.version} in ${store.location} (present: ${present.join(', ') || 'none'})`,
    );
  }
  if (stable === null) throw new RepositoryError('INVALID', `model '${model}' serves no version to be the stable one`);
  if (stable === options.version)
    throw new RepositoryError('INVALID', `model '${model}' already serves version ${stable}; a canary needs another version`);
  if (!Number.isFinite(weight) || weight < 0 || weight > 100)
    throw new RepositoryError('INVALID', `--weight must be between 0 and 100, not ${weight}`);
  const declaration: CanaryDeclaration = {
    stableVersion: String(stable),
    canaryVersion,
    canaryWeight: weight,
    stickiness: options.stickiness ?? existing?.stickiness ?? 'header',
    rollback: { ...DEFAULT_ROLLBACK, ...existing?.rollback, ...definedOnly(options.rollback ?? {}) },
  };
  const text = printCanaryDeclaration(declaration);
  // What the servers will read: a threshold they would refuse (--max-p99-ratio 0.5) is refused here, before it is written.
  parseCanaryDeclaration(text, `the canary declaration of '${model}'`);
  await store.writeModelFile(model, CANARY_FILE, text);
  logger.info({ model, stableVersion: stable, canaryVersion, canaryWeight: weight }, `wrote ${model}/${CANARY_FILE}`);
  return declaration;
}

/** `models canary --file`: validates and uploads the artifact as the model's next version, serving nothing yet. */
export async function uploadCanaryVersion(options: RepositoryAccess & { readonly model: string; readonly file: string }): Promise<number> {
  const store = openRepositoryStore(options.repository, { logger: options.logger, ...(options.s3 && { s3: options.s3 }) });
  return (await uploadNextVersion(store, options)).version;
}

/**
 * Moves the canary through `steps`, watching each for `intervalMs` on the running servers' figures:
 * a step where the canary is worse than the stable version (the same judge the servers run, on
 * the step's window), or where a server rolled it back, sets the weight to 0 and throws
 * CanaryRolledBackError. After a last step of 100 the canary becomes the serving version as with
 * `models promote` (recorded in the history) and the declaration is removed.
 */
export async function runCanarySteps(options: CanaryStepsOptions): Promise<VersionChange | undefined> {
  const { model, progress } = options;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const store = openRepositoryStore(options.repository, { logger: options.logger, ...(options.s3 && { s3: options.s3 }) });
  let declaration: CanaryDeclaration | undefined;
  for (const [i, weight] of options.steps.entries()) {
    declaration = await writeDeclaration(store, options, weight);
    const versions = { stable: declaration.stableVersion, canary: declaration.canaryVersion };
    const startedMs = Date.now();
    const before = await options.source.read(model, versions, startedMs);
    progress(
      `step ${i + 1}/${options.steps.length}: canary version ${versions.canary} at ${weight}% (stable version ${versions.stable}), watching for ${options.intervalMs / 1000} s`,
    );
    const step = `step ${i + 1}/${options.steps.length}`;
    let verdict: StepVerdict = { kind: 'wait', detail: 'not watched yet' };
    // A step the figures cannot judge yet (the canary still loading, little traffic) is watched
    // longer, and never passed unjudged: a canary is promoted only on figures that show it healthy.
    for (let watched = 1; verdict.kind === 'wait' && watched <= MAX_INTERVALS_PER_STEP; watched++) {
      await sleep(options.intervalMs);
      const after = await options.source.read(model, versions, startedMs);
      verdict = judgeStep(options.source.cumulative, before, after, declaration);
      if (verdict.kind === 'wait' && watched < MAX_INTERVALS_PER_STEP)
        progress(`${step}: not judged yet (${verdict.detail}); watching another interval`);
    }
    if (verdict.kind !== 'healthy') {
      const detail = verdict.kind === 'wait' ? `not judged after ${MAX_INTERVALS_PER_STEP} intervals: ${verdict.detail}` : verdict.detail;
      await writeDeclaration(store, options, 0);
      progress(`${step}: canary rolled back (weight 0): ${detail}`);
      throw new CanaryRolledBackError(
        `canary version ${versions.canary} of '${model}' rolled back at ${weight}%: ${detail}`,
        verdict.kind === 'wait' ? 'not_judged' : verdict.reason,
      );
    }
    progress(`${step}: healthy: ${verdict.detail}`);
  }
  if (!declaration || declaration.canaryWeight !== 100) return undefined;
  const change = await finishCanary(store, options, declaration);
  progress(`promoted: '${model}' now serves version ${change.version} (was ${change.from ?? 'none'}); ${CANARY_FILE} removed`);
  return change;
}

/** Intervals one step is watched at most while its figures cannot judge the canary. */
const MAX_INTERVALS_PER_STEP = 3;

type StepVerdict =
  { kind: 'wait'; detail: string } | { kind: 'healthy'; detail: string } | { kind: 'rollback'; reason: string; detail: string };

/**
 * A step's verdict: a server that rolled the canary back decides; else the judge on the step's
 * window (metrics endpoints). CloudWatch readings carry only the servers' rollbacks: none is healthy.
 */
function judgeStep(cumulative: boolean, before: CanaryReading, after: CanaryReading, declaration: CanaryDeclaration): StepVerdict {
  const serverRollbacks = cumulative ? after.rollbacks - before.rollbacks : after.rollbacks;
  if (serverRollbacks > 0)
    return { kind: 'rollback', reason: 'server', detail: `${serverRollbacks} server(s) rolled the canary back during the step` };
  if (!cumulative) return { kind: 'healthy', detail: 'no task rolled the canary back (CloudWatch CanaryRollbacks)' };
  return judgeCanary(figuresBetween(before.stable, after.stable), figuresBetween(before.canary, after.canary), declaration.rollback);
}

/** stable := canary, as `models promote` records it, then the declaration goes. */
async function finishCanary(store: RepositoryStore, options: CanaryStepsOptions, declaration: CanaryDeclaration): Promise<VersionChange> {
  const { model } = options;
  const { stored, parsed } = await loadModel(store, model);
  const version = Number(declaration.canaryVersion);
  const from = Number(declaration.stableVersion);
  const record: PromotionRecord = {
    action: 'promote',
    version,
    from,
    at: new Date().toISOString(),
    actor: options.actor || defaultActor(),
    message: options.message ?? `canary steps ${options.steps.join(',')}`,
  };
  await store.replaceConfig(model, writeConfigWithHistory(parsed, version, [...parsed.history, record]), stored.revision);
  await store.removeModelFile(model, CANARY_FILE);
  options.logger.info({ model, version, from }, `canary finished: model '${model}' now serves version ${version}`);
  return { model, version, from, record };
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
