import { Errors } from '../errors/errors.ts';
import { systemClock, type Clock } from './clock.ts';

/** A count given on the command line (`--rate-limit-resource=<name>:<count>[:<device>]`). */
export interface ResourceLimit {
  readonly name: string;
  readonly count: number;
  /** The device the count is for; absent: every device, and the global resource of that name. */
  readonly deviceId?: number;
}

/** What one model instance asks of the rate limiter: its group's `rate_limiter`, on the instance's device. */
export interface InstanceClaim {
  /** The instance's device: its GPU, or 0 for a KIND_CPU instance (as Triton counts CPU instances). */
  readonly deviceId: number;
  readonly resources: readonly { readonly name: string; readonly global: boolean; readonly count: number }[];
  /** Triton's weight: 2 gets half the scheduling chances of 1; 0 means 1. */
  readonly priority: number;
}

/**
 * What a scheduler sees of the rate limiter for its instances (index into the claims it
 * registered). An instance executes only while it holds its resources.
 */
export interface ExecutionGate {
  /**
   * Asks for the instance's resources: true when they are held at once; otherwise false, and
   * `onGrant` is called (from a later event-loop turn's release, never re-entrantly) once they are.
   */
  acquire(instanceIndex: number, onGrant: () => void): boolean;
  /** Gives up a pending acquire (its requests are gone). */
  cancel(instanceIndex: number): void;
  /**
   * The instance's execution ended (or failed): its resources go to the next waiter. With
   * `again`, the instance asks anew in the same step, so it competes with those already waiting
   * (by priority) rather than always going behind them; `again` is called once it holds them.
   */
  release(instanceIndex: number, again?: () => void): void;
  /** The version is unloaded: whatever its instances hold or wait for is given back. */
  close(): void;
}

interface InstanceState {
  readonly claim: InstanceClaim;
  /** Resource keys and counts, decided at registration. */
  readonly needs: readonly { readonly key: string; readonly count: number }[];
  readonly stride: number;
  /** Stride scheduling: the virtual time of the instance's next grant. */
  pass: number;
  held: boolean;
  waiter: Waiter | undefined;
  /** Granted, its onGrant not called yet. */
  delivering: Waiter | undefined;
  /** Its version was unloaded. */
  closed: boolean;
}

interface Waiter {
  readonly state: InstanceState;
  readonly onGrant: () => void;
  readonly seq: number;
  cancelled?: boolean;
}

interface Registration {
  readonly label: string;
  readonly instances: readonly InstanceState[];
}

const GLOBAL = 'global';
const keyOf = (name: string, global: boolean, deviceId: number): string => `${global ? GLOBAL : `device ${deviceId}`}\u0000${name}`;

/**
 * Triton's rate limiter (`--rate-limit=execution_count`), one for the whole server: an instance
 * executes a batch only while it holds the resources its instance group names (per device, or
 * global). A resource's count is the one given on the command line (for its device, else for
 * every device), or else the largest count any loaded instance asks for. While instances wait,
 * the one with the lowest stride-scheduling pass goes first among those whose resources are free;
 * each grant advances an instance's pass by its priority, so priority 2 gets half the grants of
 * priority 1 under saturation. Deterministic: ties go to the earlier waiter.
 */
export class RateLimiter {
  private readonly registrations = new Set<Registration>();
  private readonly limits = new Map<string, number>();
  private readonly inUse = new Map<string, number>();
  private waiters: Waiter[] = [];
  private seq = 0;
  /** The pass of the last grant: an instance that was idle joins at it, with no credit saved up. */
  private virtualTime = 0;

  constructor(
    private readonly given: readonly ResourceLimit[] = [],
    private readonly clock: Pick<Clock, 'defer'> = systemClock,
  ) {}

  /**
   * Registers a model version's instances. Fails, naming the resources, when one asks for more
   * than the command line gives it, or names a resource that other instances use the other way
   * (global against per device).
   */
  register(model: string, version: string, claims: readonly InstanceClaim[]): ExecutionGate {
    const label = `model '${model}' version ${version}`;
    this.checkScopes(label, claims);
    const instances = claims.map((claim): InstanceState => {
      const needs = new Map<string, number>();
      for (const r of claim.resources) {
        const key = keyOf(r.name, r.global, claim.deviceId);
        needs.set(key, Math.max(needs.get(key) ?? 0, r.count));
        const given = this.givenCount(r.name, r.global, claim.deviceId);
        if (given !== undefined && r.count > given) {
          throw Errors.invalidArg(
            `${label}: rate_limiter resource '${r.name}'${r.global ? ' (global)' : ` on device ${claim.deviceId}`} asks for ${r.count} ` +
              `but --rate-limit-resource gives ${given}: resource count for "${r.name}" is limited to ${given} which will prevent ` +
              `scheduling of one or more model instances, the minimum required count is ${r.count}`,
          );
        }
      }
      const stride = claim.priority === 0 ? 1 : claim.priority;
      return {
        claim,
        needs: [...needs].map(([key, count]) => ({ key, count })),
        stride,
        pass: 0,
        held: false,
        waiter: undefined,
        delivering: undefined,
        closed: false,
      };
    });
    const registration: Registration = { label, instances };
    this.registrations.add(registration);
    this.computeLimits();
    return {
      acquire: (i, onGrant) => this.acquire(instances[i]!, onGrant),
      cancel: (i) => this.cancel(instances[i]!),
      release: (i, again) => this.release(instances[i]!, again),
      close: () => this.unregister(registration),
    };
  }

  /** The count of each resource in force, by scope (`global` or `device <id>`), for logs and tests. */
  resourceCounts(): { scope: string; name: string; count: number; inUse: number }[] {
    return [...this.limits].map(([key, count]) => {
      const [scope, name] = key.split('\u0000') as [string, string];
      return { scope, name, count, inUse: this.inUse.get(key) ?? 0 };
    });
  }

  /** Instances waiting for resources. */
  get waiting(): number {
    return this.waiters.length;
  }

  private givenCount(name: string, global: boolean, deviceId: number): number | undefined {
    const forDevice = global ? undefined : this.given.findLast((g) => g.name === name && g.deviceId === deviceId);
    return (forDevice ?? this.given.findLast((g) => g.name === name && g.deviceId === undefined))?.count;
  }

  private checkScopes(label: string, claims: readonly InstanceClaim[]): void {
    const scopes = new Map<string, boolean>();
    for (const registration of this.registrations) {
      for (const { claim } of registration.instances) for (const r of claim.resources) scopes.set(r.name, r.global);
    }
    const own = new Map<string, boolean>();
    for (const claim of claims) {
      for (const r of claim.resources) {
        const seen = own.get(r.name) ?? scopes.get(r.name);
        if (seen !== undefined && seen !== r.global) {
          throw Errors.invalidArg(
            `${label}: resource "${r.name}" is present as both global and device-specific resource in the model configuration`,
          );
        }
        own.set(r.name, r.global);
      }
    }
  }

  private computeLimits(): void {
    this.limits.clear();
    for (const registration of this.registrations) {
      for (const { claim } of registration.instances) {
        for (const r of claim.resources) {
          const key = keyOf(r.name, r.global, claim.deviceId);
          const count = this.givenCount(r.name, r.global, claim.deviceId) ?? Math.max(this.limits.get(key) ?? 0, r.count);
          this.limits.set(key, count);
        }
      }
    }
  }

  private fits(state: InstanceState): boolean {
    return state.needs.every(({ key, count }) => (this.inUse.get(key) ?? 0) + count <= (this.limits.get(key) ?? 0));
  }

  private hold(state: InstanceState): void {
    for (const { key, count } of state.needs) this.inUse.set(key, (this.inUse.get(key) ?? 0) + count);
    state.held = true;
    this.virtualTime = Math.max(this.virtualTime, state.pass);
    state.pass += state.stride;
  }

  private acquire(state: InstanceState, onGrant: () => void): boolean {
    const waiter = this.wait(state, onGrant);
    const granted = this.grant();
    const now = granted.indexOf(waiter);
    if (now >= 0) {
      granted.splice(now, 1);
      state.delivering = undefined;
    }
    this.deliver(granted);
    return now >= 0;
  }

  private wait(state: InstanceState, onGrant: () => void): Waiter {
    if (state.held || state.waiter || state.delivering) throw new Error('rate limiter: an instance asked for its resources twice');
    state.pass = Math.max(state.pass, this.virtualTime);
    const waiter: Waiter = { state, onGrant, seq: this.seq++ };
    state.waiter = waiter;
    this.waiters.push(waiter);
    return waiter;
  }

  private cancel(state: InstanceState): void {
    if (state.delivering) {
      // Granted but not yet told: the grant is void and its resources go back.
      state.delivering.cancelled = true;
      state.delivering = undefined;
      this.release(state);
      return;
    }
    if (!state.waiter) return;
    this.waiters = this.waiters.filter((w) => w !== state.waiter);
    state.waiter = undefined;
  }

  private release(state: InstanceState, again?: () => void): void {
    if (state.held) {
      for (const { key, count } of state.needs) this.inUse.set(key, (this.inUse.get(key) ?? 0) - count);
      state.held = false;
    }
    if (again && !state.closed) this.wait(state, again);
    this.deliver(this.grant());
  }

  private unregister(registration: Registration): void {
    if (!this.registrations.delete(registration)) return;
    for (const state of registration.instances) {
      state.closed = true;
      this.cancel(state);
      this.release(state);
    }
    this.computeLimits();
    this.deliver(this.grant());
  }

  /** Grants, in pass order, every waiter whose resources are free; returns them. */
  private grant(): Waiter[] {
    if (this.waiters.length === 0) return [];
    const order = [...this.waiters].sort((a, b) => a.state.pass - b.state.pass || a.seq - b.seq);
    const granted: Waiter[] = [];
    for (const waiter of order) {
      if (!this.fits(waiter.state)) continue;
      this.hold(waiter.state);
      waiter.state.waiter = undefined;
      waiter.state.delivering = waiter;
      granted.push(waiter);
    }
    if (granted.length > 0) this.waiters = this.waiters.filter((w) => !granted.includes(w));
    return granted;
  }

  private deliver(granted: readonly Waiter[]): void {
    if (granted.length === 0) return;
    // Each scheduler forms its batch in a later turn: never inside another scheduler's release.
    this.clock.defer(() => {
      for (const waiter of granted) {
        if (waiter.cancelled) continue;
        waiter.state.delivering = undefined;
        waiter.onGrant();
      }
    });
  }
}
