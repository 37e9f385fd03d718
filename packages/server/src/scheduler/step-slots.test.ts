import { describe, expect, it } from 'vitest';
import { listenedAbortController } from '../protocol/abort-listeners.ts';
import { StepSlots, stepSlotsOf } from './step-slots.ts';

const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('StepSlots (max_inflight_requests of one ensemble step)', () => {
  it('lets N through, then one per release, in arrival order', async () => {
    const slots = new StepSlots(2);
    const through: string[] = [];
    const take = (name: string) => void slots.acquire(undefined).then(() => through.push(name));
    for (const name of ['a', 'b', 'c', 'd', 'e']) take(name);
    await settled();
    expect(through).toEqual(['a', 'b']);
    expect(slots.counts).toEqual({ inFlight: 2, waiting: 3 });
    slots.release();
    await settled();
    expect(through).toEqual(['a', 'b', 'c']);
    slots.release();
    slots.release();
    await settled();
    expect(through).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(slots.counts).toEqual({ inFlight: 2, waiting: 0 });
  });

  for (const [kind, controller] of [
    ['a plain signal', () => new AbortController()],
    ["a listened signal (an HTTP connection's)", listenedAbortController],
  ] as const) {
    it(`a wait cancelled through ${kind} goes through at once and leaves the line; its release frees its slot`, async () => {
      const slots = new StepSlots(1);
      await slots.acquire(undefined);
      const cancel = controller();
      const through: string[] = [];
      void slots.acquire(cancel.signal).then(() => through.push('cancelled'));
      void slots.acquire(undefined).then(() => through.push('next'));
      await settled();
      expect(through).toEqual([]);
      cancel.abort();
      await settled();
      expect(through).toEqual(['cancelled']);
      expect(slots.counts).toEqual({ inFlight: 2, waiting: 1 });
      slots.release(); // the cancelled step's
      slots.release(); // the first one's
      await settled();
      expect(through).toEqual(['cancelled', 'next']);
      expect(slots.counts).toEqual({ inFlight: 1, waiting: 0 });
    });
  }

  it('an already cancelled request does not wait', async () => {
    const slots = new StepSlots(1);
    await slots.acquire(undefined);
    await slots.acquire(AbortSignal.abort());
    expect(slots.counts).toEqual({ inFlight: 2, waiting: 0 });
  });

  it('counts nothing for an ensemble without the limit', () => {
    expect(stepSlotsOf(['s1', 's2'], 0)).toBeUndefined();
    expect([...stepSlotsOf(['s1', 's2'], 3)!].map(([step, slots]) => [step, slots.max])).toEqual([
      ['s1', 3],
      ['s2', 3],
    ]);
  });
});
