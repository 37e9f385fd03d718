import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../test-support/scheduler.ts';
import { RateLimiter, type InstanceClaim } from './rate-limiter.ts';

const claim = (resources: InstanceClaim['resources'], { deviceId = 0, priority = 1 } = {}): InstanceClaim => ({
  deviceId,
  resources,
  priority,
});
const r = (name: string, count: number, global = false) => ({ name, count, global });

describe('resource counts', () => {
  it("are the largest count any instance asks for, per device, as in Triton's example", () => {
    const limiter = new RateLimiter();
    limiter.register('a', '1', [claim([r('R1', 4), r('R2', 4)])]);
    limiter.register('b', '1', [claim([r('R2', 5), r('R3', 10), r('R4', 5)])]);
    limiter.register('c', '1', [claim([r('R1', 1), r('R3', 7), r('R4', 2)])]);
    expect(limiter.resourceCounts().sort((x, y) => x.name.localeCompare(y.name))).toEqual([
      { scope: 'device 0', name: 'R1', count: 4, inUse: 0 },
      { scope: 'device 0', name: 'R2', count: 5, inUse: 0 },
      { scope: 'device 0', name: 'R3', count: 10, inUse: 0 },
      { scope: 'device 0', name: 'R4', count: 5, inUse: 0 },
    ]);
  });

  it("take the command line's count, for one device or all, and a global resource has one pool", () => {
    const limiter = new RateLimiter([
      { name: 'R1', count: 10 },
      { name: 'R2', count: 5, deviceId: 0 },
      { name: 'R2', count: 8, deviceId: 1 },
      { name: 'R3', count: 2 },
    ]);
    limiter.register('a', '1', [claim([r('R1', 1), r('R2', 1), r('R3', 1, true)], { deviceId: 0 })]);
    limiter.register('b', '1', [claim([r('R1', 1), r('R2', 1), r('R3', 1, true)], { deviceId: 1 })]);
    const counts = Object.fromEntries(limiter.resourceCounts().map((c) => [`${c.scope} ${c.name}`, c.count]));
    expect(counts).toEqual({ 'device 0 R1': 10, 'device 0 R2': 5, 'global R3': 2, 'device 1 R1': 10, 'device 1 R2': 8 });
  });

  it('refuse a config that asks for more than the command line gives, naming the resource', () => {
    const limiter = new RateLimiter([{ name: 'gpu_mem', count: 2 }]);
    expect(() => limiter.register('big', '3', [claim([r('gpu_mem', 3)])])).toThrow(
      /model 'big' version 3: rate_limiter resource 'gpu_mem' on device 0 asks for 3 but --rate-limit-resource gives 2/,
    );
    // Nothing of the refused model stays registered.
    expect(limiter.resourceCounts()).toEqual([]);
  });

  it('refuse a resource named global by one instance and per device by another', () => {
    const limiter = new RateLimiter();
    limiter.register('a', '1', [claim([r('R', 1, true)])]);
    expect(() => limiter.register('b', '1', [claim([r('R', 1)])])).toThrow(/"R" is present as both global and device-specific/);
  });
});

describe('grants', () => {
  it('never hold more than the count, per device; a global resource is shared across devices', () => {
    const clock = new FakeClock();
    const limiter = new RateLimiter([], clock);
    const gate = limiter.register('m', '1', [
      claim([r('mem', 2)], { deviceId: 0 }),
      claim([r('mem', 2)], { deviceId: 0 }),
      claim([r('mem', 2)], { deviceId: 1 }),
    ]);
    const granted: number[] = [];
    expect(gate.acquire(0, () => granted.push(0))).toBe(true);
    expect(gate.acquire(1, () => granted.push(1))).toBe(false);
    // Device 1 has its own copies.
    expect(gate.acquire(2, () => granted.push(2))).toBe(true);
    clock.endTurn();
    expect(granted).toEqual([]);
    gate.release(0);
    expect(granted).toEqual([]); // delivered at the end of the turn, never inside release
    clock.endTurn();
    expect(granted).toEqual([1]);

    const shared = new RateLimiter([], clock);
    const g = shared.register('g', '1', [claim([r('lock', 1, true)], { deviceId: 0 }), claim([r('lock', 1, true)], { deviceId: 1 })]);
    expect(g.acquire(0, () => {})).toBe(true);
    expect(g.acquire(1, () => {})).toBe(false);
  });

  it('serve waiting instances by priority as a weight: priority 2 gets half the turns of priority 1', () => {
    const clock = new FakeClock();
    const limiter = new RateLimiter([], clock);
    const gates = {
      fast: limiter.register('fast', '1', [claim([r('gpu', 1)], { priority: 1 })]),
      slow: limiter.register('slow', '1', [claim([r('gpu', 1)], { priority: 2 })]),
    };
    const order: string[] = [];
    let holder: 'fast' | 'slow' | undefined;
    const granted = (name: 'fast' | 'slow') => () => {
      expect(holder).toBeUndefined(); // never two at once with a count of 1
      holder = name;
      order.push(name);
    };
    expect(gates.fast.acquire(0, granted('fast'))).toBe(true);
    holder = 'fast';
    order.push('fast');
    expect(gates.slow.acquire(0, granted('slow'))).toBe(false);
    // Saturation: whoever finishes asks again as it releases.
    for (let i = 0; i < 299; i++) {
      const done = holder!;
      holder = undefined;
      gates[done].release(0, granted(done));
      clock.endTurn();
    }
    expect(order).toHaveLength(300);
    expect(order.filter((n) => n === 'fast')).toHaveLength(200);
    expect(order.slice(0, 6)).toEqual(['fast', 'slow', 'fast', 'slow', 'fast', 'fast']);
  });

  it('priority 0 means 1', () => {
    const clock = new FakeClock();
    const limiter = new RateLimiter([], clock);
    const a = limiter.register('a', '1', [claim([r('gpu', 1)], { priority: 0 })]);
    const b = limiter.register('b', '1', [claim([r('gpu', 1)], { priority: 1 })]);
    const order: string[] = [];
    let holder = a;
    a.acquire(0, () => {});
    order.push('a');
    b.acquire(0, () => ((holder = b), order.push('b')));
    for (let i = 0; i < 9; i++) {
      const done = holder;
      done.release(0);
      if (done === a) a.acquire(0, () => ((holder = a), order.push('a')));
      else b.acquire(0, () => ((holder = b), order.push('b')));
      clock.endTurn();
    }
    expect(order).toEqual(['a', 'b', 'a', 'b', 'a', 'b', 'a', 'b', 'a', 'b']);
  });

  it('an instance that was idle does not save up turns', () => {
    const clock = new FakeClock();
    const limiter = new RateLimiter([], clock);
    const busy = limiter.register('busy', '1', [claim([r('gpu', 1)])]);
    const idle = limiter.register('idle', '1', [claim([r('gpu', 1)])]);
    for (let i = 0; i < 50; i++) {
      expect(busy.acquire(0, () => {})).toBe(true);
      busy.release(0);
    }
    const order: string[] = [];
    let holder = idle;
    expect(idle.acquire(0, () => {})).toBe(true);
    order.push('idle');
    busy.acquire(0, () => ((holder = busy), order.push('busy')));
    for (let i = 0; i < 5; i++) {
      const done = holder;
      done.release(0);
      const name = done === busy ? 'busy' : 'idle';
      done.acquire(0, () => ((holder = done), order.push(name)));
      clock.endTurn();
    }
    expect(order).toEqual(['idle', 'busy', 'idle', 'busy', 'idle', 'busy']);
  });

  it('a cancelled wait, a cancelled undelivered grant and an unloaded version give everything back', () => {
    const clock = new FakeClock();
    const limiter = new RateLimiter([], clock);
    const a = limiter.register('a', '1', [claim([r('gpu', 1)])]);
    const b = limiter.register('b', '1', [claim([r('gpu', 1)])]);
    const c = limiter.register('c', '1', [claim([r('gpu', 1)])]);
    const granted: string[] = [];
    expect(a.acquire(0, () => granted.push('a'))).toBe(true);
    expect(b.acquire(0, () => granted.push('b'))).toBe(false);
    b.cancel(0);
    expect(c.acquire(0, () => granted.push('c'))).toBe(false);
    a.release(0); // granted to c, not yet told
    c.cancel(0); // c's requests went away meanwhile
    clock.endTurn();
    expect(granted).toEqual([]);
    expect(limiter.resourceCounts()[0]!.inUse).toBe(0);

    expect(a.acquire(0, () => granted.push('a'))).toBe(true);
    expect(b.acquire(0, () => granted.push('b'))).toBe(false);
    a.close(); // unloaded while executing: its hold goes to b
    clock.endTurn();
    expect(granted).toEqual(['b']);
    b.close();
    c.close();
    expect(limiter.resourceCounts()).toEqual([]);
    expect(limiter.waiting).toBe(0);
  });
});
