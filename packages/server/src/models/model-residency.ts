import { setTimeout as sleep } from 'node:timers/promises';
import { Errors } from '../errors/errors.ts';
import type { ModelFootprint } from '../memory/model-footprint.ts';

/** The limits of many models per host, and how long a load waits for room. */
export interface ResidencyLimits {
  /** --model-memory-limit: host memory the loaded model instances may take, bytes. @default no limit */
  readonly hostBytes?: number;
  /** --model-gpu-memory-limit: device memory the loaded instances may take on each GPU, bytes. @default no limit */
  readonly gpuBytesPerDevice?: number;
  /** How long a load waits for loaded models in use to finish their requests, so that it can make room, ms. */
  readonly roomWaitMs: number;
}

/** What the residency asks of the model manager, which knows what each model is doing. */
export interface EvictionHost {
  /**
   * The models that may be evicted now, with their last use (larger is more recent): loaded for
   * requests, nothing queued, running or waiting for them, not loading, not a step of an ensemble in
   * use or pinned.
   */
  evictable(): Iterable<{ readonly name: string; readonly lastUse: number }>;
  /** Pinned: loaded by --load-model or a load request, never evicted. */
  isPinned(name: string): boolean;
  /**
   * Stops serving the model (to make room for `loading`) if it may still be evicted when its turn
   * comes, and resolves once its instances have closed (its memory given back) with true; false
   * when it was not evicted.
   */
  evict(name: string, loading: string): Promise<boolean>;
}

/** Memory held for one version from the start of its load until its instances have closed. */
export interface ModelMemoryHold {
  /** Gives part of the host memory back (what the version turned out not to need); at most what is held. */
  giveBack(hostBytes: number): void;
  /**
   * Holds GPU memory the version was measured to take once open, beyond its estimate (a Python
   * model's process on a GPU): counted against the limit for later loads, and freed by evicting it.
   */
  holdMeasuredGpu(gpuBytes: ReadonlyMap<number, number>): void;
  /** Gives it back; later calls do nothing. */
  release(): void;
}

/** How often a load waiting for models in use to finish looks again. */
const ROOM_POLL_MS = 20;

interface Held {
  host: number;
  readonly gpu: Map<number, number>;
}

function addInto(
  into: Held,
  footprint: { readonly hostBytes: number; readonly gpuBytes: ReadonlyMap<number, number> },
  sign: 1 | -1,
): void {
  into.host += sign * footprint.hostBytes;
  for (const [device, bytes] of footprint.gpuBytes) into.gpu.set(device, (into.gpu.get(device) ?? 0) + sign * bytes);
}

/**
 * Many models per host (issue 27): what the loaded model versions take against --model-memory-limit
 * (and --model-gpu-memory-limit per GPU), by the footprints the memory guard counts. A load that
 * needs room evicts the least recently used models that may be evicted until it fits, waits for
 * models in use to finish when nothing may be evicted yet, and fails naming the sizes when it can
 * never fit. One load decides at a time, so two loads never pick the same model or count the same
 * freed bytes; the evictions they decide (draining, closing instances) run side by side.
 */
export class ModelResidency {
  private readonly held: Held = { host: 0, gpu: new Map() };
  private readonly byModel = new Map<string, Held>();
  /** Models being evicted now: no second load picks them. */
  private readonly evicting = new Set<string>();
  private turn: Promise<unknown> = Promise.resolve();

  constructor(
    readonly limits: ResidencyLimits,
    private readonly models: EvictionHost,
  ) {}

  /** Host memory the loaded (and loading, and draining) versions take, bytes. */
  get hostBytes(): number {
    return this.held.host;
  }

  /** Device memory they take, by GPU, bytes. */
  get gpuBytes(): ReadonlyMap<number, number> {
    return this.held.gpu;
  }

  /**
   * Holds a version's footprint before its instances open, evicting what must go to make room.
   * Throws INVALID_ARG naming both sizes when the version is larger than a limit or cannot fit
   * beside the pinned models, and UNAVAILABLE when models in use held the room past the wait.
   */
  async reserve(model: string, version: string, footprint: ModelFootprint): Promise<ModelMemoryHold> {
    const what = `model '${model}' version ${version}`;
    this.refuseLargerThanLimits(what, footprint);
    const deadline = Date.now() + this.limits.roomWaitMs;
    for (;;) {
      // One decision at a time; the evictions decided run beside the next decisions.
      const step = this.turn.then(() => this.decide(model, what, footprint, deadline));
      this.turn = step.catch(() => undefined);
      const next = await step;
      if ('hold' in next) return next.hold;
      await next.wait;
    }
  }

  /**
   * What a load needing `footprint` does now: take its room, or wait for a model evicted for it to
   * close (its memory stays counted until then, so no other load counts it too), or for models in
   * use to finish; or fail.
   */
  private decide(
    model: string,
    what: string,
    footprint: ModelFootprint,
    deadline: number,
  ): { hold: ModelMemoryHold } | { wait: Promise<unknown> } {
    const short = this.shortfall(footprint);
    if (short === undefined) return { hold: this.hold(model, footprint) };
    const victim = this.victim(short, model);
    if (victim !== undefined) {
      this.evicting.add(victim);
      return { wait: this.models.evict(victim, model).finally(() => this.evicting.delete(victim)) };
    }
    if (this.evicting.size > 0) return { wait: sleep(ROOM_POLL_MS) };
    this.refuseBesidePinned(what, footprint);
    if (Date.now() >= deadline) {
      throw Errors.unavailable(
        `${what} needs about ${describeNeed(footprint, short)}, and the models loaded there are in use or loading: ` +
          `none could be evicted within ${this.limits.roomWaitMs / 1000} s (${limitFlags(short)})`,
      );
    }
    return { wait: sleep(ROOM_POLL_MS) };
  }

  private hold(model: string, footprint: ModelFootprint): ModelMemoryHold {
    let own = this.byModel.get(model);
    if (!own) this.byModel.set(model, (own = { host: 0, gpu: new Map() }));
    const mine: Held = { host: footprint.hostBytes, gpu: new Map(footprint.gpuBytes) };
    const counted = { hostBytes: mine.host, gpuBytes: mine.gpu };
    addInto(this.held, counted, 1);
    addInto(own, counted, 1);
    let released = false;
    return {
      giveBack: (hostBytes) => {
        const bytes = released ? 0 : Math.min(Math.max(0, hostBytes), mine.host);
        mine.host -= bytes;
        this.held.host -= bytes;
        own.host -= bytes;
      },
      holdMeasuredGpu: (gpuBytes) => {
        if (released) return;
        for (const [device, bytes] of gpuBytes) {
          if (!(bytes > 0)) continue;
          mine.gpu.set(device, (mine.gpu.get(device) ?? 0) + bytes);
          own.gpu.set(device, (own.gpu.get(device) ?? 0) + bytes);
          this.held.gpu.set(device, (this.held.gpu.get(device) ?? 0) + bytes);
        }
      },
      release: () => {
        if (released) return;
        released = true;
        const left = { hostBytes: mine.host, gpuBytes: mine.gpu };
        addInto(this.held, left, -1);
        addInto(own, left, -1);
        if (own.host === 0 && [...own.gpu.values()].every((b) => b === 0)) this.byModel.delete(model);
      },
    };
  }

  /** What is missing for `footprint` to fit now: host bytes and bytes per GPU over the limits; undefined when it fits. */
  private shortfall(footprint: ModelFootprint): { host: number; gpu: Map<number, number> } | undefined {
    const { hostBytes: hostLimit, gpuBytesPerDevice: gpuLimit } = this.limits;
    const host = hostLimit === undefined ? 0 : Math.max(0, this.held.host + footprint.hostBytes - hostLimit);
    const gpu = new Map<number, number>();
    if (gpuLimit !== undefined) {
      for (const [device, bytes] of footprint.gpuBytes) {
        const over = (this.held.gpu.get(device) ?? 0) + bytes - gpuLimit;
        if (over > 0) gpu.set(device, over);
      }
    }
    return host > 0 || gpu.size > 0 ? { host, gpu } : undefined;
  }

  /** The least recently used model that may be evicted and whose eviction gives room where it is missing. */
  private victim(short: { host: number; gpu: ReadonlyMap<number, number> }, loading: string): string | undefined {
    let found: { name: string; lastUse: number } | undefined;
    for (const candidate of this.models.evictable()) {
      if (candidate.name === loading || this.evicting.has(candidate.name)) continue;
      const own = this.byModel.get(candidate.name);
      if (!own) continue;
      const helps = (short.host > 0 && own.host > 0) || [...short.gpu.keys()].some((d) => (own.gpu.get(d) ?? 0) > 0);
      if (helps && (found === undefined || candidate.lastUse < found.lastUse)) found = candidate;
    }
    return found?.name;
  }

  private refuseLargerThanLimits(what: string, footprint: ModelFootprint): void {
    const { hostBytes: hostLimit, gpuBytesPerDevice: gpuLimit } = this.limits;
    if (hostLimit !== undefined && footprint.hostBytes > hostLimit) {
      throw Errors.invalidArg(
        `${what} needs about ${footprint.hostBytes} bytes of host memory (${footprint.description}), ` +
          `more than the ${hostLimit} bytes of --model-memory-limit`,
      );
    }
    for (const [device, bytes] of footprint.gpuBytes) {
      if (gpuLimit !== undefined && bytes > gpuLimit) {
        throw Errors.invalidArg(
          `${what} needs about ${bytes} bytes of memory on GPU ${device} (${footprint.description}), ` +
            `more than the ${gpuLimit} bytes --model-gpu-memory-limit allows on each GPU`,
        );
      }
    }
  }

  /** A version that cannot fit even with every model but the pinned ones evicted fails at once. */
  private refuseBesidePinned(what: string, footprint: ModelFootprint): void {
    const pinned: Held = { host: 0, gpu: new Map() };
    for (const [name, own] of this.byModel) if (this.models.isPinned(name)) addInto(pinned, { hostBytes: own.host, gpuBytes: own.gpu }, 1);
    const { hostBytes: hostLimit, gpuBytesPerDevice: gpuLimit } = this.limits;
    if (hostLimit !== undefined && pinned.host + footprint.hostBytes > hostLimit) {
      throw Errors.invalidArg(
        `${what} needs about ${footprint.hostBytes} bytes of host memory (${footprint.description}), but the pinned models ` +
          `(--load-model, load requests) hold ${pinned.host} of the ${hostLimit} bytes of --model-memory-limit`,
      );
    }
    for (const [device, bytes] of footprint.gpuBytes) {
      const held = pinned.gpu.get(device) ?? 0;
      if (gpuLimit !== undefined && held + bytes > gpuLimit) {
        throw Errors.invalidArg(
          `${what} needs about ${bytes} bytes of memory on GPU ${device} (${footprint.description}), but the pinned models ` +
            `(--load-model, load requests) hold ${held} of the ${gpuLimit} bytes --model-gpu-memory-limit allows on each GPU`,
        );
      }
    }
  }
}

function describeNeed(footprint: ModelFootprint, short: { host: number; gpu: ReadonlyMap<number, number> }): string {
  const parts = [
    ...(short.host > 0 ? [`${short.host} more bytes of host memory`] : []),
    ...[...short.gpu].map(([device, bytes]) => `${bytes} more bytes on GPU ${device}`),
  ];
  return `${parts.join(' and ')} (${footprint.description})`;
}

function limitFlags(short: { host: number; gpu: ReadonlyMap<number, number> }): string {
  return [...(short.host > 0 ? ['--model-memory-limit'] : []), ...(short.gpu.size > 0 ? ['--model-gpu-memory-limit'] : [])].join(', ');
}
