import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { figuresBetween, judgeCanary, NO_FIGURES, type CanaryRollbackReason, type VersionFigures } from '../metrics/canary-judge.ts';
import { FAILURE_REASONS } from '../metrics/version-series.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';
import type { CanaryDeclaration } from '../repository/canary-declaration.ts';

/** The stickiness keys a request carries: the header (gRPC metadata) and the request parameter. */
export interface RouteKeys {
  readonly header?: string | undefined;
  readonly parameter?: string | undefined;
}

interface Sample {
  readonly atMs: number;
  readonly stable: VersionFigures;
  readonly canary: VersionFigures;
}

interface CanaryState {
  readonly text: string;
  readonly declaration: CanaryDeclaration;
  rolledBack: { readonly reason: CanaryRollbackReason; readonly detail: string } | undefined;
  samples: Sample[];
  readonly timer: NodeJS.Timeout;
}

export interface CanaryControlOptions {
  readonly metrics: ServerMetrics;
  readonly logger: Logger;
  /** Milliseconds since some origin (tests of the watch pass their own). @default Date.now */
  readonly now?: () => number;
  /** Random numbers in [0, 1) for requests without a stickiness key. @default Math.random */
  readonly random?: () => number;
  /** The versions of a model that serve now (only their figures are read). */
  readonly servingVersions: (model: string) => { has(version: string): boolean };
}

/**
 * The canary releases in force in this replica, one per model with a valid canary.json: which
 * version a request that names none goes to (weights, stickiness), and the watch that stops
 * sending those requests to a canary that is clearly worse than the stable version over the
 * declared window. A rolled-back canary stays rolled back until its declaration changes.
 */
export class CanaryControl {
  private readonly models = new Map<string, CanaryState>();
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(private readonly options: CanaryControlOptions) {
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
  }

  /** The declaration a repository look found for a model (undefined: none); unchanged text changes nothing. */
  apply(model: string, found: { readonly text: string; readonly declaration: CanaryDeclaration } | undefined): void {
    const current = this.models.get(model);
    if (current && found && current.text === found.text) return;
    if (current) this.remove(model, current);
    if (!found) return;
    const { declaration } = found;
    const tickMs = Math.min(1000, Math.max(50, (declaration.rollback.windowSeconds * 1000) / 20));
    const timer = setInterval(() => this.watch(model), tickMs);
    timer.unref();
    const state: CanaryState = { text: found.text, declaration, rolledBack: undefined, samples: [], timer };
    this.models.set(model, state);
    this.publishWeights(model, state);
    this.options.logger.info(
      {
        model,
        stableVersion: declaration.stableVersion,
        canaryVersion: declaration.canaryVersion,
        canaryWeight: declaration.canaryWeight,
        stickiness: declaration.stickiness,
      },
      'canary declaration in force',
    );
  }

  /** The version serving versions that the split sends a request naming none to; undefined without a canary. */
  versionFor(model: string, keys: RouteKeys | undefined, serving: { has(version: string): boolean }): string | undefined {
    const state = this.models.get(model);
    if (!state) return undefined;
    const { stableVersion, canaryVersion, stickiness } = state.declaration;
    const weight = this.weightInForce(state);
    const key = stickiness === 'header' ? keys?.header : stickiness === 'parameter' ? keys?.parameter : undefined;
    const toCanary = weight > 0 && (key !== undefined && key !== '' ? keyPoint(key) : this.random() * 100) < weight;
    const chosen = toCanary ? canaryVersion : stableVersion;
    if (serving.has(chosen)) return chosen;
    // A version that is not loaded (yet, or any more): the other one, else the version policy's choice.
    const other = toCanary ? stableVersion : canaryVersion;
    return toCanary && serving.has(other) ? other : undefined;
  }

  /** The split in force of a model: the canary's weight (0 after a rollback), or undefined without a declaration. */
  canaryWeightOf(model: string): number | undefined {
    const state = this.models.get(model);
    return state ? this.weightInForce(state) : undefined;
  }

  /** The versions the declaration in force names (kept loaded while a newer declaration is invalid). */
  versionsInForce(model: string): number[] {
    const state = this.models.get(model);
    return state ? [Number(state.declaration.stableVersion), Number(state.declaration.canaryVersion)] : [];
  }

  /** Stops every watch. */
  close(): void {
    for (const [model, state] of this.models) this.remove(model, state);
  }

  private weightInForce(state: CanaryState): number {
    return state.rolledBack ? 0 : state.declaration.canaryWeight;
  }

  private remove(model: string, state: CanaryState): void {
    clearInterval(state.timer);
    this.models.delete(model);
    this.options.metrics.canaryWeight.remove({ model, version: state.declaration.stableVersion });
    this.options.metrics.canaryWeight.remove({ model, version: state.declaration.canaryVersion });
  }

  private publishWeights(model: string, state: CanaryState): void {
    const weight = this.weightInForce(state);
    this.options.metrics.canaryWeight.labels({ model, version: state.declaration.canaryVersion }).set(weight);
    this.options.metrics.canaryWeight.labels({ model, version: state.declaration.stableVersion }).set(100 - weight);
  }

  /** One look at both versions' figures over the window; rolls the canary back when the judge says so. */
  private watch(model: string): void {
    const state = this.models.get(model);
    if (!state || state.rolledBack) return;
    const { declaration } = state;
    const now = this.now();
    const serving = this.options.servingVersions(model);
    const sample: Sample = {
      atMs: now,
      stable: serving.has(declaration.stableVersion) ? this.figuresOf(model, declaration.stableVersion) : NO_FIGURES,
      canary: serving.has(declaration.canaryVersion) ? this.figuresOf(model, declaration.canaryVersion) : NO_FIGURES,
    };
    state.samples.push(sample);
    // The oldest sample kept is the window's start: at most windowSeconds before now.
    const windowStart = now - declaration.rollback.windowSeconds * 1000;
    while (state.samples.length > 1 && state.samples[0]!.atMs < windowStart) state.samples.shift();
    const start = state.samples[0]!;
    const verdict = judgeCanary(
      figuresBetween(start.stable, sample.stable),
      figuresBetween(start.canary, sample.canary),
      declaration.rollback,
    );
    if (verdict.kind !== 'rollback') return;
    state.rolledBack = { reason: verdict.reason, detail: verdict.detail };
    this.publishWeights(model, state);
    this.options.metrics.canaryRollbacks.labels({ model, reason: verdict.reason }).inc();
    this.options.logger.warn(
      {
        model,
        stableVersion: declaration.stableVersion,
        canaryVersion: declaration.canaryVersion,
        reason: verdict.reason,
        detail: verdict.detail,
        windowSeconds: declaration.rollback.windowSeconds,
      },
      'canary rolled back: unversioned requests go to the stable version until the declaration changes',
    );
  }

  private figuresOf(model: string, version: string): VersionFigures {
    const series = this.options.metrics.versionSeries(model, version);
    return {
      success: series.success,
      failure: FAILURE_REASONS.reduce((sum, reason) => sum + series.failures[reason], 0),
      latencyBounds: series.requestSeconds.upperBounds,
      latencyCumulative: series.requestSeconds.cumulative(),
    };
  }
}

/** Where a stickiness key falls in [0, 100): the same key always falls at the same point, so it keeps its version. */
function keyPoint(key: string): number {
  return (createHash('sha256').update(key).digest().readUInt32BE(0) / 2 ** 32) * 100;
}
