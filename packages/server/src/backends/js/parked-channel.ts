/**
 * The hand-off of small batches between the main thread and a JavaScript model's worker through
 * shared memory, for one request at a time (issue 44). A worker that has just answered a batch and
 * has nothing else open parks in Atomics.wait for a while instead of going back to its event loop;
 * a batch that finds it parked is written into shared memory and the worker is woken with a futex,
 * and its answer comes back the same way (Atomics.waitAsync on the main thread). MessagePort's
 * per-message costs on both sides (a structured clone, the loop's wake through an eventfd, the
 * message event) were 100-120 us of a round trip against 72 us this way.
 *
 * Everything else (large batches, a busy worker, every other message) goes through postMessage as
 * before. A message posted while the worker is parked rings it back to its loop (`unpark`).
 *
 * The worker's state word moves LOOP -> PARKED (the worker parks), PARKED -> CLAIMED (the main
 * thread, with compareExchange, takes the parked worker for one message), and back to LOOP by the
 * worker: after its park times out (compareExchange from PARKED, so a claim made meanwhile is
 * never lost) or once it has read the claimed message.
 */

/** The worker's state word. */
const STATE = 0;
/** Bumped by the main thread after it wrote a claimed message; the worker waits on it. */
const REQUEST_SEQ = 1;
/** Bumped by the worker after it wrote an answer; the main thread waits on it. */
const ANSWER_SEQ = 2;
/** What the claimed message is: EXECUTE or UNPARK. */
const REQUEST_KIND = 3;
/** What the answer is: EXECUTED, FAILED, or POSTED (the answer went through postMessage: too large). */
const ANSWER_KIND = 4;
/** 1 when the claimed batch was the only request the main thread held: the worker may spin for the next. */
const LONE = 5;
/** Int32s 6 and 7 hold a float64: when the main thread rang the worker (epoch ms), for the worker's gap and wake-up. */
const RING_AT_BYTE = 6 * 4;
/** 1 once the main thread has woken the parked worker with a heads-up (a call is arriving); the worker clears it after its spin. */
const HEADS_UP = 8;
/** Ten int32s keep the slots' float64s 8-byte aligned. */
const CONTROL_INTS = 10;

const LOOP = 0;
const PARKED = 1;
const CLAIMED = 2;

const EXECUTE = 1;
const UNPARK = 2;

const EXECUTED = 1;
const FAILED = 2;
const POSTED = 3;

/** Bytes of each direction's slot: a batch (its tensors and its JSON) larger than this goes through postMessage. */
export const PARKED_SLOT_BYTES = 64 * 1024;
/** How long an idle worker stays parked before it goes back to its loop (its model's own timers wait this long at most). */
export const PARK_MS = 2;

/**
 * How long the main thread spins for a lone batch's answer, ms: the worker's wake-up and a short run.
 * On the 2-core development VM a round trip to a parked worker took 18-27 us spinning against 85-89 us
 * asleep: the main thread's own wake-up from epoll or a futex, about 60 us, is what spinning spares.
 * Under wrk at one connection the tiny JavaScript model's p50 went from 2.3x to 1.6x the echo's.
 */
const SPIN_MS = 0.1;
/** A batch whose last run took longer than this (the worker's own time) is not spun for. */
const SPIN_RUN_LIMIT_NS = 50_000;
/**
 * After a spin that ran out (the worker woke late: another process held the other core), this many
 * lone batches wait asleep before the next spin, so a host without a free core pays little for trying.
 */
const SPIN_BACKOFF_BATCHES = 8;

/**
 * How long a parked worker spins for its next batch before it sleeps on the futex, ms. At one request at a
 * time the next batch comes 0.15-0.3 ms after the answer (the reply written, the client's turn, the next
 * request read), and the main thread would wait for a sleeping worker's wake-up, about 60 us on the 2-core
 * VM. The worker spins only after a lone batch (the main thread held no other request, so a core is likely
 * free) that came within this bound of its park: with other requests in hand the main thread needs the
 * cores, and after a longer gap the next is not likely soon. Under wrk at one connection the tiny JavaScript
 * model's p50 went from 371 to 176 us for 3% less CPU per request; at 2, 4 and 16 connections neither p50
 * nor CPU per request rose. Over gRPC at one stream the gap is longer, and a spin costs more CPU than the
 * wake-up it saves: WAKE_UPS_PER_SPIN bounds the gap in the worker's own wake-ups too.
 */
const WORKER_SPIN_MS = 0.5;

/**
 * The worker spins for its next batch only while the gap to it (park to the main thread's ring) is within
 * this many of its own wake-ups from the futex (ring to running): a spin costs the gap in CPU to save one
 * wake-up of latency. On the 2-core VM, at one request at a time, the gap's median is 3-4.5 wake-ups over
 * HTTP (0.18-0.29 ms against 0.06-0.07) and 7-8 over gRPC (0.48-0.57 ms), where a spin cost 10-50% more CPU
 * per request for a p50 within the noise. 4 lost most of HTTP's gain; 6 kept it (p50 214 against 219 us,
 * the same CPU). A bound in wake-ups moves with the machine, where one in milliseconds does not.
 */
const WAKE_UPS_PER_SPIN = 6;
/**
 * How long a worker woken by a heads-up (a call is arriving, `ParkedChannelHost.headsUp`) spins for the ring, in its
 * own wake-ups (0.5 ms at most). On the 2-core VM, over gRPC at one stream, a call's stream opened 80-180 us before
 * its batch rang the worker, against a wake-up of 60-70 us: the worker is running by the ring. A heads-up for a call
 * to another model costs the worker a wake-up and this spin.
 */
const HEADS_UP_WAKE_UPS = 4;
/** The weight of each new wake-up in the worker's running estimate. */
const WAKE_UP_WEIGHT = 0.25;

/** How long the worker may spin, ms: `spinMs`, or `wakeUpsPerSpin` of its wake-ups if less (`spinMs` until one is measured). */
export function workerSpinBoundMs(spinMs: number, wakeUpMs: number, wakeUpsPerSpin = WAKE_UPS_PER_SPIN): number {
  if (wakeUpMs === Infinity || wakeUpsPerSpin === Infinity) return spinMs;
  return Math.min(spinMs, wakeUpsPerSpin * wakeUpMs);
}

/** Milliseconds since the epoch, comparable between threads (each has its own performance.timeOrigin). */
const epochMs = (): number => performance.timeOrigin + performance.now();

/**
 * Polls one word of the control block until it moves, for up to `ms`, without sleeping; after a poll that
 * ran out, the next `backoff` calls sleep at once (return false), so a host without a free core pays little
 * for trying. The worker's spin has no backoff: its gap rule stops it after a spin that ran out.
 */
class BackedOffSpin {
  private skipped = 0;
  /** Polls that saw the word move, and polls that ran out. */
  caught = 0;
  ranOut = 0;

  constructor(
    private readonly control: Int32Array,
    private readonly index: number,
    private readonly ms: number,
    /** Calls that sleep at once after a poll that ran out. */
    private readonly backoff: number,
  ) {}

  /** Whether the word moved from `seen` within the bound (`ms`, or the spin's own). */
  until(seen: number, ms = this.ms): boolean {
    if (this.skipped > 0) {
      this.skipped--;
      return false;
    }
    const until = performance.now() + ms;
    while (Atomics.load(this.control, this.index) === seen) {
      if (performance.now() > until) {
        this.skipped = this.backoff;
        this.ranOut++;
        return false;
      }
    }
    this.caught++;
    return true;
  }
}

/** A slot holds a small header (int32s, then float64s), the tensors' bytes, then UTF-8 text. */
const HEADER_INTS = 4;
const HEADER_FLOATS = 3;
const HEADER_BYTES = HEADER_INTS * 4 + HEADER_FLOATS * 8;

export interface ParkedExecute {
  readonly id: number;
  readonly buffer: ArrayBuffer;
  /** The batch's requests, packed as JSON. */
  readonly requests: string;
}

export type ParkedAnswer =
  | { readonly type: 'executed'; readonly id: number; readonly buffer: ArrayBuffer; readonly responses: string; readonly timings: Timings }
  | { readonly type: 'execute-failed'; readonly id: number; readonly message: string }
  /** The answer was too large for the slot: it comes through postMessage. */
  | { readonly type: 'posted' };

interface Timings {
  readonly computeInputNs: number;
  readonly computeInferNs: number;
  readonly computeOutputNs: number;
}

/** The shared memory of one worker's channel: made by the main thread, given to the worker in its workerData. */
export function parkedChannelMemory(): SharedArrayBuffer {
  return new SharedArrayBuffer(CONTROL_INTS * 4 + 2 * PARKED_SLOT_BYTES);
}

/** One slot of the channel: a header of int32s and float64s, bytes, then text. */
class Slot {
  private readonly ints: Int32Array;
  private readonly floats: Float64Array;
  private readonly bytes: Buffer;

  constructor(memory: SharedArrayBuffer, offset: number) {
    this.ints = new Int32Array(memory, offset, HEADER_INTS);
    this.floats = new Float64Array(memory, offset + HEADER_INTS * 4, HEADER_FLOATS);
    this.bytes = Buffer.from(memory, offset + HEADER_BYTES, PARKED_SLOT_BYTES - HEADER_BYTES);
  }

  /** Whether `byteLength` bytes and `text` fit; the text's UTF-8 length can be at most 3 bytes a UTF-16 unit. */
  fits(byteLength: number, text: string): boolean {
    const room = this.bytes.byteLength - byteLength;
    return text.length * 3 <= room || Buffer.byteLength(text) <= room;
  }

  write(id: number, data: ArrayBuffer | undefined, text: string, floats?: Timings): void {
    const byteLength = data?.byteLength ?? 0;
    if (data) this.bytes.set(new Uint8Array(data), 0);
    const textLength = this.bytes.write(text, byteLength, 'utf8');
    this.ints[0] = id;
    this.ints[1] = byteLength;
    this.ints[2] = textLength;
    if (floats) {
      this.floats[0] = floats.computeInputNs;
      this.floats[1] = floats.computeInferNs;
      this.floats[2] = floats.computeOutputNs;
    }
  }

  get id(): number {
    return this.ints[0]!;
  }

  /** The bytes, copied into a buffer of their own (the slot is reused by the next message). */
  data(): ArrayBuffer {
    const copy = new Uint8Array(this.ints[1]!);
    copy.set(this.bytes.subarray(0, copy.byteLength));
    return copy.buffer;
  }

  text(): string {
    const start = this.ints[1]!;
    return this.bytes.toString('utf8', start, start + this.ints[2]!);
  }

  timings(): Timings {
    return { computeInputNs: this.floats[0]!, computeInferNs: this.floats[1]!, computeOutputNs: this.floats[2]! };
  }
}

/** Atomics.waitAsync (Node 16+), which TypeScript's ES2023 library does not declare. */
interface AtomicsWithWaitAsync {
  waitAsync(array: Int32Array, index: number, value: number): { async: false; value: string } | { async: true; value: Promise<string> };
}

/** The main thread's side of one worker's channel. */
export class ParkedChannelHost {
  /** The worker's own time for the last batch answered here: a longer run is not spun for. */
  private lastRunNs = 0;
  /** The spin for a lone batch's answer. */
  private readonly answerSpin: BackedOffSpin;
  /** A batch was handed over and its answer not yet read. */
  private awaitingAnswer = false;
  /** The last batch handed over was the only request the main thread held. */
  private lastLone = false;
  private readonly control: Int32Array;
  private readonly ringAt: Float64Array;
  private readonly request: Slot;
  private readonly answer: Slot;

  constructor(
    memory: SharedArrayBuffer,
    /** How long a lone batch's answer is spun for, ms. */
    spinMs = SPIN_MS,
  ) {
    this.control = new Int32Array(memory, 0, CONTROL_INTS);
    this.ringAt = new Float64Array(memory, RING_AT_BYTE, 1);
    this.request = new Slot(memory, CONTROL_INTS * 4);
    this.answer = new Slot(memory, CONTROL_INTS * 4 + PARKED_SLOT_BYTES);
    this.answerSpin = new BackedOffSpin(this.control, ANSWER_SEQ, spinMs, SPIN_BACKOFF_BATCHES);
  }

  /**
   * Hands a batch to the parked worker, if it is parked and the batch fits: resolves with its answer.
   * Undefined when the batch must go through postMessage. `alone`: nothing else waits for the main
   * thread, which then spins for the answer of a batch whose last run was short (SPIN_MS at most).
   */
  tryExecute(batch: ParkedExecute, alone = false): Promise<ParkedAnswer> | undefined {
    // One batch in the slots at a time: the next one's answer would overwrite this one's before it is read.
    if (this.awaitingAnswer) return undefined;
    if (Atomics.load(this.control, STATE) !== PARKED || !this.request.fits(batch.buffer.byteLength, batch.requests)) return undefined;
    if (Atomics.compareExchange(this.control, STATE, PARKED, CLAIMED) !== PARKED) return undefined;
    this.awaitingAnswer = true;
    const seen = Atomics.load(this.control, ANSWER_SEQ);
    this.request.write(batch.id, batch.buffer, batch.requests);
    Atomics.store(this.control, LONE, alone ? 1 : 0);
    this.lastLone = alone;
    if (alone) this.ringAt[0] = epochMs();
    this.ring(EXECUTE);
    if (alone && this.lastRunNs < SPIN_RUN_LIMIT_NS && this.answerSpin.until(seen)) return Promise.resolve(this.readAnswer());
    const waited = (Atomics as unknown as AtomicsWithWaitAsync).waitAsync(this.control, ANSWER_SEQ, seen);
    return waited.async ? waited.value.then(() => this.readAnswer()) : Promise.resolve(this.readAnswer());
  }

  /**
   * A call is arriving that may bring this worker a batch: a parked worker is woken now, so that its wake-up from the
   * futex (60-70 us on the 2-core VM) overlaps the main thread's reading of the call instead of following the ring.
   * No second futex wake until the worker has taken this one (spun for the ring); nothing when the worker is not parked.
   */
  headsUp(): void {
    // After a batch that was not lone, the calls come together (a stream of many, many clients): the ring follows the
    // reading of all of them, later than the worker's spin lasts.
    if (!this.lastLone || this.awaitingAnswer || Atomics.load(this.control, STATE) !== PARKED) return;
    if (Atomics.compareExchange(this.control, HEADS_UP, 0, 1) === 0) Atomics.notify(this.control, REQUEST_SEQ, 1);
  }

  /** Whether the worker is parked now (a batch would be handed over): for diagnostics and tests. */
  get workerParked(): boolean {
    return Atomics.load(this.control, STATE) === PARKED;
  }

  /** A message was just posted: a parked worker goes back to its loop to read it. */
  unpark(): void {
    if (Atomics.load(this.control, STATE) !== PARKED) return;
    if (Atomics.compareExchange(this.control, STATE, PARKED, CLAIMED) === PARKED) this.ring(UNPARK);
  }

  private ring(kind: number): void {
    this.control[REQUEST_KIND] = kind;
    Atomics.add(this.control, REQUEST_SEQ, 1);
    Atomics.notify(this.control, REQUEST_SEQ, 1);
  }

  private readAnswer(): ParkedAnswer {
    this.awaitingAnswer = false;
    const kind = Atomics.load(this.control, ANSWER_KIND);
    if (kind === POSTED) return { type: 'posted' };
    const id = this.answer.id;
    if (kind === FAILED) return { type: 'execute-failed', id, message: this.answer.text() };
    const timings = this.answer.timings();
    this.lastRunNs = timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs;
    return { type: 'executed', id, buffer: this.answer.data(), responses: this.answer.text(), timings };
  }
}

/** The worker's side of its channel. */
export class ParkedChannelWorker {
  private parking = false;
  /** From the last park to the main thread's ring of the lone batch that ended it, ms (Infinity when no lone batch ended it). */
  private lastGapMs = Infinity;
  /** The running estimate of a wake-up from the futex, ring to running, ms (Infinity until one is seen). */
  private wakeUpMs = Infinity;
  /** The spin for the next batch. */
  private readonly requestSpin: BackedOffSpin;
  private headsUps = 0;
  private readonly control: Int32Array;
  private readonly ringAt: Float64Array;
  private readonly request: Slot;
  private readonly answer: Slot;

  constructor(
    memory: SharedArrayBuffer,
    /** How long the worker spins for its next batch, ms, while its batches come that close together. */
    private readonly spinMs = WORKER_SPIN_MS,
    /** The gap spun for, in the worker's wake-ups (WAKE_UPS_PER_SPIN). */
    private readonly wakeUpsPerSpin = WAKE_UPS_PER_SPIN,
    /** The spin after a heads-up, in the worker's wake-ups (HEADS_UP_WAKE_UPS). */
    private readonly headsUpWakeUps = HEADS_UP_WAKE_UPS,
  ) {
    this.control = new Int32Array(memory, 0, CONTROL_INTS);
    this.ringAt = new Float64Array(memory, RING_AT_BYTE, 1);
    this.request = new Slot(memory, CONTROL_INTS * 4);
    this.answer = new Slot(memory, CONTROL_INTS * 4 + PARKED_SLOT_BYTES);
    this.requestSpin = new BackedOffSpin(this.control, REQUEST_SEQ, spinMs, 0);
  }

  /**
   * Parks for up to PARK_MS: the batch the main thread handed over meanwhile, or undefined (timed
   * out, rung back to the loop for a posted message, or `posted` found one). Blocks the thread
   * while parked. `posted` is asked once parked: a message posted before the main thread could
   * see the park (and so ring it) is found there.
   */
  park(posted: () => boolean): ParkedExecute | undefined {
    // A message `posted` reads may lead to another park (the test's worker answers and parks again): that one
    // returns at once, as a park inside a park would leave the outer one waiting on a state it no longer holds.
    if (this.parking) return undefined;
    this.parking = true;
    try {
      return this.parkOnce(posted);
    } finally {
      this.parking = false;
    }
  }

  private parkOnce(posted: () => boolean): ParkedExecute | undefined {
    const seen = Atomics.load(this.control, REQUEST_SEQ);
    Atomics.store(this.control, HEADS_UP, 0);
    Atomics.store(this.control, STATE, PARKED);
    const parkedAt = epochMs();
    let spun = false;
    let timedOut = posted();
    if (!timedOut && !(spun = this.spinForRequest(seen))) {
      const woke = this.sleepForRequest(seen, parkedAt);
      timedOut = woke === 'timed-out';
      spun = woke === 'caught';
    }
    if (timedOut) {
      if (Atomics.compareExchange(this.control, STATE, PARKED, LOOP) === PARKED) {
        this.lastGapMs = Infinity;
        return undefined;
      }
      // Claimed as the park ran out: the main thread writes its message, then bumps REQUEST_SEQ.
      Atomics.wait(this.control, REQUEST_SEQ, seen);
    }
    const kind = this.control[REQUEST_KIND];
    // Only a lone batch's worker spins for the next: with other requests in hand, the main thread needs the cores.
    if (kind === EXECUTE && this.control[LONE] === 1) {
      const ringAt = this.ringAt[0]!;
      this.lastGapMs = Math.max(0, ringAt - parkedAt);
      if (!spun) {
        const wakeUp = Math.max(0, epochMs() - ringAt);
        this.wakeUpMs = this.wakeUpMs === Infinity ? wakeUp : this.wakeUpMs + WAKE_UP_WEIGHT * (wakeUp - this.wakeUpMs);
      }
    } else this.lastGapMs = Infinity;
    const batch = kind === EXECUTE ? { id: this.request.id, buffer: this.request.data(), requests: this.request.text() } : undefined;
    Atomics.store(this.control, STATE, LOOP);
    return batch;
  }

  /**
   * Sleeps on the futex until the ring, or until PARK_MS after the park ('timed-out'). Woken by a heads-up
   * (REQUEST_SEQ unchanged), the worker spins for the ring ('caught' when it came), then sleeps again.
   */
  private sleepForRequest(seen: number, parkedAt: number): 'rung' | 'caught' | 'timed-out' {
    for (;;) {
      // Also a heads-up given before this thread reached the futex (its notify found no waiter).
      if (Atomics.load(this.control, HEADS_UP) === 1) {
        this.headsUps++;
        const caught = this.requestSpin.until(seen, workerSpinBoundMs(this.spinMs, this.wakeUpMs, this.headsUpWakeUps));
        // The next heads-up wakes the worker again (this one was for another model, or came long before its ring).
        Atomics.store(this.control, HEADS_UP, 0);
        if (caught) return 'caught';
      }
      const left = parkedAt + PARK_MS - epochMs();
      if (left <= 0 || Atomics.wait(this.control, REQUEST_SEQ, seen, left) === 'timed-out') return 'timed-out';
      if (Atomics.load(this.control, REQUEST_SEQ) !== seen) return 'rung';
    }
  }

  /** Whether the next batch came within the spin's bound, polled without sleeping; only while batches come that close together. */
  private spinForRequest(seen: number): boolean {
    const boundMs = workerSpinBoundMs(this.spinMs, this.wakeUpMs, this.wakeUpsPerSpin);
    return this.lastGapMs <= boundMs && this.requestSpin.until(seen, boundMs);
  }

  /** Parks that ended with a message caught by spinning, spins that ran out, and heads-ups that woke the worker (for the tests). */
  get spins(): { caught: number; ranOut: number; headsUps: number } {
    return { caught: this.requestSpin.caught, ranOut: this.requestSpin.ranOut, headsUps: this.headsUps };
  }

  /** The answer to a batch handed over in shared memory; false when it does not fit (post it, then call `posted`). */
  tryAnswer(answer: Exclude<ParkedAnswer, { type: 'posted' }>): boolean {
    if (answer.type === 'execute-failed') {
      this.answer.write(answer.id, undefined, answer.message.slice(0, PARKED_SLOT_BYTES / 4));
      this.settle(FAILED);
      return true;
    }
    if (!this.answer.fits(answer.buffer.byteLength, answer.responses)) return false;
    this.answer.write(answer.id, answer.buffer, answer.responses, answer.timings);
    this.settle(EXECUTED);
    return true;
  }

  /** The answer to a batch handed over in shared memory went through postMessage. */
  posted(): void {
    this.settle(POSTED);
  }

  private settle(kind: number): void {
    this.control[ANSWER_KIND] = kind;
    Atomics.add(this.control, ANSWER_SEQ, 1);
    Atomics.notify(this.control, ANSWER_SEQ, 1);
  }
}
