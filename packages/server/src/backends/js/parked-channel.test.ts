import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sourceWorkerUrl } from '../source-worker-bundle.ts';
import {
  PARK_MS,
  PARKED_SLOT_BYTES,
  ParkedChannelHost,
  parkedChannelMemory,
  workerSpinBoundMs,
  type ParkedAnswer,
} from './parked-channel.ts';

/** The real channel between this thread and a worker that parks as a JavaScript model's does (test-support/parked-echo-worker.ts). */
describe('the parked channel', () => {
  let worker: Worker;
  let host: ParkedChannelHost;
  let memory: SharedArrayBuffer;
  const posted: unknown[] = [];
  let nextId = 0;

  /** A fresh channel to a fresh worker (`argv`: the worker's spin bound, ms, if not its default). */
  const connect = async (argv: string[] = []): Promise<void> => {
    memory = parkedChannelMemory();
    host = new ParkedChannelHost(memory);
    posted.length = 0;
    worker = new Worker(sourceWorkerUrl(new URL('../../../test-support/parked-echo-worker.ts', import.meta.url)), {
      workerData: memory,
      argv,
    });
    worker.on('message', (message) => posted.push(message));
    await once(worker, 'message');
    posted.length = 0;
  };

  beforeEach(() => connect());

  afterEach(async () => {
    await worker.terminate();
  });

  /** The next message the worker posted, as soon as it comes. */
  const nextPosted = (): Promise<unknown> =>
    posted.length > 0 ? Promise.resolve(posted.shift()) : new Promise((resolve) => worker.once('message', () => resolve(posted.shift())));

  /**
   * Whether the worker parks after its last answer (it posts that answer, then parks), within twice PARK_MS.
   * Read in a spin, not on later turns: a turn of this thread on a loaded machine outlasts the park.
   */
  const untilParked = (): boolean => {
    const until = performance.now() + 2 * PARK_MS;
    while (!host.workerParked && performance.now() < until);
    return host.workerParked;
  };

  /**
   * `attempt` made while the worker is parked: it answers undefined when the park ran out before it (this thread
   * held up past PARK_MS on a loaded machine), and then the worker is given a batch to park after, and tried again.
   */
  const whileParked = async <T>(attempt: () => Promise<T | undefined>): Promise<T> => {
    // At least 50 tries, and for up to 10 s: on a loaded CI runner most tries can find the park over.
    const until = performance.now() + 10_000;
    for (let i = 0; i < 50 || performance.now() < until; i++) {
      await execute([1], 'warm');
      if (!untilParked()) continue;
      const result = await attempt();
      if (result !== undefined) return result;
    }
    throw new Error('the worker never stayed parked long enough');
  };

  /** One batch: through the channel when the worker is parked, else posted; its answer and which way it went. */
  const execute = async (bytes: number[] | Uint8Array, text: string): Promise<{ answer: ParkedAnswer; handedOver: boolean }> => {
    const id = nextId++;
    const buffer = Uint8Array.from(bytes).buffer;
    const parked = host.tryExecute({ id, buffer, requests: text });
    if (parked) {
      const answer = await parked;
      return { answer: answer.type === 'posted' ? ((await nextPosted()) as ParkedAnswer) : answer, handedOver: true };
    }
    worker.postMessage({ id, buffer, requests: text }, [buffer]);
    host.unpark();
    return { answer: (await nextPosted()) as ParkedAnswer, handedOver: false };
  };

  it('hands one batch at a time to the parked worker and brings its answer back, byte for byte', async () => {
    let handedOver = 0;
    for (let i = 0; i < 200; i++) {
      const bytes = [i & 255, 1, 2, 3, 250];
      const result = await execute(bytes, `batch ${i} é`);
      expect(result.answer).toMatchObject({ type: 'executed', id: nextId - 1, responses: `BATCH ${i} É` });
      if (result.answer.type !== 'executed') throw new Error('not executed');
      expect([...new Uint8Array(result.answer.buffer)]).toEqual([...bytes].reverse());
      if (result.handedOver) {
        handedOver++;
        expect(result.answer.timings).toEqual({ computeInputNs: 1, computeInferNs: 2, computeOutputNs: 1 });
      }
    }
    // The first batch finds the worker in its loop; the next ones find it parked, unless this thread was away for PARK_MS.
    expect(handedOver).toBeGreaterThan(100);
  });

  it('a lone batch is awaited by spinning: its answer is ready before the event loop turns', async () => {
    // The same channel, spinning up to 2 s rather than 0.1 ms: a loaded machine's slow wake-ups cannot make this pass or fail.
    const spinning = new ParkedChannelHost(memory, 2000);
    await execute([1], 'first');
    let handedOver = 0;
    let beforeTheLoop = 0;
    for (let i = 0; i < 200 && handedOver < 20; i++) {
      await execute([1], 'park again'); // the worker parks after each batch it answers
      if (!untilParked()) continue;
      const id = nextId++;
      const parked = spinning.tryExecute({ id, buffer: Uint8Array.from([i, 9]).buffer, requests: `lone ${i}` }, true);
      if (!parked) continue; // the park ran out meanwhile (a loaded machine): nothing was handed over
      handedOver++;
      const first = await Promise.race([parked, new Promise((resolve) => setImmediate(() => resolve('loop')))]);
      const answer = first === 'loop' ? await parked : (first as ParkedAnswer);
      if (first !== 'loop') beforeTheLoop++;
      expect(answer).toMatchObject({ type: 'executed', id, responses: `LONE ${i}` });
      if (answer.type === 'executed') expect([...new Uint8Array(answer.buffer)]).toEqual([9, i]);
    }
    // Every lone batch handed over is answered before the loop turns (a park that ran out, this thread held up past
    // PARK_MS on a loaded machine, hands nothing over: the next round parks the worker again).
    expect(handedOver).toBeGreaterThanOrEqual(10);
    expect(beforeTheLoop).toBe(handedOver);
  });

  it('hands over one batch at a time: a second one while the first answer is unread goes by postMessage', async () => {
    for (let round = 0; round < 10; round++) {
      const answers = await whileParked(async () => {
        const a = host.tryExecute({ id: nextId++, buffer: Uint8Array.from([1, 2]).buffer, requests: 'one' });
        if (!a) return undefined;
        // Without yielding, until the worker has answered and parked again: the first answer is unread, unless the
        // worker answered before its wait was even set up (then it was read at once, and the slot is free).
        const until = performance.now() + 200;
        while (performance.now() < until && !host.workerParked);
        if (!host.workerParked) return undefined;
        const b = host.tryExecute({ id: nextId++, buffer: Uint8Array.from([3]).buffer, requests: 'two' });
        return { first: await a, second: b && (await b) };
      });
      // Each answer is its own batch's: a second batch in the slots would have overwritten the first's answer.
      expect(answers.first).toMatchObject({ type: 'executed', responses: 'ONE' });
      if (answers.second) expect(answers.second).toMatchObject({ type: 'executed', responses: 'TWO' });
    }
  });

  it('posts a batch too large for the slot, even to a parked worker', async () => {
    const large = new Uint8Array(PARKED_SLOT_BYTES).fill(3);
    const result = await whileParked(async () => (host.workerParked ? execute(large, 'large') : undefined));
    expect(result.handedOver).toBe(false);
    expect(result.answer).toMatchObject({ type: 'executed', responses: 'LARGE' });
  });

  it('an answer too large for the slot comes by postMessage, announced through the channel', async () => {
    const result = await whileParked(async () => {
      const tried = await execute([1], 'big');
      return tried.handedOver ? tried : undefined;
    });
    expect(result.handedOver).toBe(true);
    expect(result.answer.type).toBe('executed');
    if (result.answer.type === 'executed') expect(result.answer.buffer.byteLength).toBe(PARKED_SLOT_BYTES + 1);
  });

  it('a batch that fails in a parked worker fails with its message', async () => {
    const result = await whileParked(async () => {
      const tried = await execute([1], 'fail');
      return tried.handedOver ? tried : undefined;
    });
    expect(result.handedOver).toBe(true);
    expect(result.answer).toEqual({ type: 'execute-failed', id: nextId - 1, message: 'it failed' });
  });

  it('a message posted to a parked worker is read at once, and an idle worker keeps its timers', async () => {
    const started = await whileParked(async () => {
      const at = performance.now();
      worker.postMessage({ type: 'note', text: 'hello' });
      host.unpark();
      expect(await nextPosted()).toEqual({ noted: 'hello' });
      return at;
    });
    expect(performance.now() - started).toBeLessThan(500);
    await sleep(60);
    worker.postMessage({ type: 'ticks' });
    host.unpark();
    const { ticks } = (await nextPosted()) as { ticks: number };
    // A 1 ms interval over 60 ms: the park (PARK_MS at a time, only after a batch) held it back little.
    expect(ticks).toBeGreaterThan(10);
  });

  interface Spins {
    caught: number;
    ranOut: number;
    headsUps: number;
  }
  /** How often the worker caught a batch by spinning, how often its spin ran out, and how many heads-ups woke it, so far. */
  const spins = async (): Promise<Spins> => {
    worker.postMessage({ type: 'spins' });
    host.unpark();
    return ((await nextPosted()) as { spins: Spins }).spins;
  };

  describe('a worker spinning up to 20 ms for its next batch, whatever its wake-ups (gaps on a loaded runner stay well inside that)', () => {
    beforeEach(async () => {
      await worker.terminate();
      await connect(['20', 'Infinity']);
    });

    /**
     * `count` batches, each handed over as soon as the worker has parked after the last; `alone` as the main thread
     * says it. Returns how many followed the last one straight (no batch posted, no park missed, in between).
     */
    const closeTogether = async (count: number, alone: boolean): Promise<number> => {
      // Its answer spun for when alone: this thread then never waits for its loop.
      const sender = alone ? new ParkedChannelHost(memory, 2000) : host;
      let handedOver = 0;
      let straight = 0;
      let afterOne = false;
      // For up to 10 s: on a loaded runner many tries find the park over before this thread comes back to it.
      const until = performance.now() + 10_000;
      for (let i = 0; handedOver < count && performance.now() < until; i++) {
        // A worker that went back to its loop (after a posted message, or a park that ran out) parks after a batch.
        if (!untilParked()) {
          afterOne = false;
          await execute([1], 'park again');
          continue;
        }
        const parked = sender.tryExecute({ id: nextId++, buffer: Uint8Array.from([i & 255]).buffer, requests: 'close' }, alone);
        if (!parked) {
          afterOne = false;
          continue;
        }
        expect(await parked).toMatchObject({ type: 'executed', responses: 'CLOSE' });
        handedOver++;
        if (afterOne) straight++;
        afterOne = true;
      }
      expect(handedOver).toBe(count);
      return straight;
    };

    it('catches lone batches that come close together spinning; sleeps for others, and after a gap past the bound', async () => {
      await execute([1], 'first');
      const before = await spins();
      const straight = await closeTogether(100, true);
      const lone = await spins();
      // A lone batch straight after another is spun for: caught, or the spin ran out (this thread away past the bound;
      // then the next park may sleep, its gap too long). A batch after a posted one finds the worker asleep.
      expect(straight).toBeGreaterThan(0);
      expect(lone.caught - before.caught).toBeGreaterThan(0);
      expect(lone.caught - before.caught + (lone.ranOut - before.ranOut)).toBeGreaterThanOrEqual(straight / 2);

      // Batches while the main thread holds other requests: it needs the cores, and the worker sleeps.
      await closeTogether(50, false);
      const notAlone = await spins();
      expect(notAlone.caught - lone.caught).toBeLessThanOrEqual(1);

      // 30 ms apart, after lone batches close together: the spin after the first runs out, and no park spins after
      // that (without the gap rule, every park would).
      await closeTogether(10, true);
      const close = await spins();
      for (let i = 0; i < 20; i++) {
        await execute([i], 'apart');
        await sleep(30);
      }
      const apart = await spins();
      expect(apart.ranOut - close.ranOut).toBeLessThanOrEqual(1);
      expect(apart.caught - close.caught).toBeLessThanOrEqual(1);
    });
  });

  it('spins for no gap longer than its wake-ups allow: with none allowed, lone batches close together find it asleep', async () => {
    await worker.terminate();
    await connect(['20', '0']);
    await execute([1], 'first');
    const before = await spins();
    const sender = new ParkedChannelHost(memory, 2000);
    let handedOver = 0;
    const until = performance.now() + 10_000;
    while (handedOver < 50 && performance.now() < until) {
      if (!untilParked()) {
        await execute([1], 'park again');
        continue;
      }
      const parked = sender.tryExecute({ id: nextId++, buffer: Uint8Array.from([1]).buffer, requests: 'close' }, true);
      if (!parked) continue;
      expect(await parked).toMatchObject({ type: 'executed', responses: 'CLOSE' });
      handedOver++;
    }
    expect(handedOver).toBe(50);
    const after = await spins();
    // At most the park after the first lone batch, before the worker had seen a wake-up of its own.
    expect(after.caught - before.caught + (after.ranOut - before.ranOut)).toBeLessThanOrEqual(1);
  });

  describe('a heads-up (a call is arriving) to a worker that sleeps through every gap', () => {
    /** Lone batches, each given `headsUp` first and handed over `readMs` later, checked byte for byte; their count. */
    const lone = async (count: number, headsUp: boolean, readMs: number): Promise<void> => {
      const sender = new ParkedChannelHost(memory, 2000);
      let handedOver = 0;
      const until = performance.now() + 10_000;
      while (handedOver < count && performance.now() < until) {
        if (!untilParked()) {
          await execute([1], 'park again');
          continue;
        }
        if (headsUp) sender.headsUp();
        // The call's reading, before its batch rings the worker.
        const rings = performance.now() + readMs;
        while (performance.now() < rings);
        const id = nextId++;
        const parked = sender.tryExecute({ id, buffer: Uint8Array.from([handedOver, 7]).buffer, requests: 'after heads-up' }, true);
        if (!parked) continue;
        const answer = await parked;
        expect(answer).toMatchObject({ type: 'executed', id, responses: 'AFTER HEADS-UP' });
        if (answer.type === 'executed') expect([...new Uint8Array(answer.buffer)]).toEqual([7, handedOver]);
        handedOver++;
      }
      expect(handedOver).toBe(count);
    };

    it('wakes it before the ring: it spins for the batch and catches it', async () => {
      await worker.terminate();
      // No gap spun for; after a heads-up, up to 20 ms (a loaded runner's wake-ups stay well inside that).
      await connect(['20', '0', 'Infinity']);
      await execute([1], 'first');
      const before = await spins();
      await lone(30, false, 0.5);
      const without = await spins();
      expect(without.headsUps - before.headsUps).toBe(0);
      expect(without.caught - before.caught).toBeLessThanOrEqual(1);
      await lone(30, true, 0.5);
      const after = await spins();
      // A worker that wakes after the ring (a loaded runner) takes the batch as rung: most are caught after a heads-up.
      expect(after.headsUps - without.headsUps).toBeGreaterThan(0);
      expect(after.caught - without.caught).toBeGreaterThan(0);
      expect(after.caught - without.caught).toBeLessThanOrEqual(after.headsUps - without.headsUps);
    });

    it('loses nothing when no batch follows: the spin runs out, and the next batch is answered', async () => {
      await worker.terminate();
      // A spin of 1 ms after a heads-up; the next batch comes 20 ms later.
      await connect(['1', '0', 'Infinity']);
      const sender = new ParkedChannelHost(memory, 2000);
      await execute([1], 'first');
      const before = await spins();
      let after = before;
      // Until three heads-ups were taken, for up to 10 s: on a loaded runner the park can run out before one is given.
      const until = performance.now() + 10_000;
      for (let i = 0; after.headsUps - before.headsUps < 3 && performance.now() < until; i++) {
        await execute([1], 'park again');
        if (!untilParked()) continue;
        const lone = sender.tryExecute({ id: nextId++, buffer: Uint8Array.from([1]).buffer, requests: 'lone' }, true);
        if (!lone) continue;
        await lone;
        if (!untilParked()) continue;
        sender.headsUp();
        sender.headsUp(); // no second wake while the first is not taken
        await sleep(20);
        const result = await execute([i & 255, 2], `next ${i}`);
        expect(result.answer).toMatchObject({ type: 'executed', responses: `NEXT ${i}` });
        if (result.answer.type === 'executed') expect([...new Uint8Array(result.answer.buffer)]).toEqual([2, i & 255]);
        after = await spins();
      }
      const taken = after.headsUps - before.headsUps;
      expect(taken).toBeGreaterThanOrEqual(3);
      // Each heads-up taken ends in one spin: it ran out (no batch came), or caught the next batch after a long stall.
      expect(after.ranOut - before.ranOut + (after.caught - before.caught)).toBeGreaterThanOrEqual(taken);
      expect(after.ranOut - before.ranOut).toBeGreaterThan(0);
    });

    it('is not given after a batch that was not lone (calls that come together ring later than a spin lasts)', async () => {
      await worker.terminate();
      await connect(['20', '0', 'Infinity']);
      await execute([1], 'first');
      const before = await spins();
      for (let i = 0; i < 10; i++) {
        await execute([1], 'not lone');
        if (!untilParked()) continue;
        host.headsUp();
        await sleep(1);
      }
      const after = await spins();
      expect(after.headsUps - before.headsUps).toBe(0);
    });
  });

  it('bounds the spin by the wake-ups it saves, and by its own bound', () => {
    // Six wake-ups of 60 us; six of 100 us would be longer than the bound.
    expect(workerSpinBoundMs(0.5, 0.06)).toBeCloseTo(0.36);
    expect(workerSpinBoundMs(0.5, 0.1)).toBe(0.5);
    expect(workerSpinBoundMs(0.5, 0.06, 2)).toBeCloseTo(0.12);
    // None measured yet, or no limit in wake-ups: the bound alone.
    expect(workerSpinBoundMs(0.5, Infinity)).toBe(0.5);
    expect(workerSpinBoundMs(20, 0, Infinity)).toBe(20);
    expect(workerSpinBoundMs(20, 0.1, 0)).toBe(0);
  });

  it('loses no batch when claims race the park running out', async () => {
    await execute([1], 'first');
    for (let i = 0; i < 60; i++) {
      // Around PARK_MS after the last answer: the claim meets the worker parked, leaving, or gone back to its loop.
      const until = performance.now() + PARK_MS * (0.8 + (i % 5) * 0.1);
      while (performance.now() < until);
      const result = await Promise.race([execute([i], `r${i}`), sleep(5000).then(() => 'lost' as const)]);
      expect(result).not.toBe('lost');
      if (result !== 'lost') expect(result.answer).toMatchObject({ type: 'executed', responses: `R${i}` });
    }
  });
});
