import type { ExecutionResult, ModelInstance } from '../backends/backend.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { Clock } from './clock.ts';

/** A clock the test moves by hand. */
export class FakeClock implements Clock {
  private now = 0n;
  private timers: { at: bigint; fn: () => void; id: number }[] = [];
  private nextId = 0;

  nowNs(): bigint {
    return this.now;
  }
  setTimeout(fn: () => void, delayMs: number): unknown {
    const id = this.nextId++;
    this.timers.push({ at: this.now + BigInt(Math.ceil(delayMs * 1e6)), fn, id });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== handle);
  }
  /** Moves time forward, firing due timers in order. */
  advanceMs(ms: number): void {
    const target = this.now + BigInt(Math.round(ms * 1e6));
    for (;;) {
      const due = this.timers.filter((t) => t.at <= target).sort((a, b) => (a.at < b.at ? -1 : 1))[0];
      if (!due) break;
      this.now = due.at;
      this.timers = this.timers.filter((t) => t !== due);
      due.fn();
    }
    this.now = target;
  }
}

/**
 * A model instance that computes OUTPUT0 = INPUT0 + 1 for FP32 and records every batch; a
 * run completes when the test calls `finish()` (or at once with `autoFinish`).
 */
export class RecordingInstance implements ModelInstance {
  readonly batches: number[][] = [];
  private pending: (() => void)[] = [];
  onFatal: ((error: Error) => void) | undefined;
  failNext = false;

  constructor(private readonly autoFinish = false) {}

  execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    const input = inputs[0]!;
    const values = new Float32Array(input.data.slice().buffer);
    this.batches.push(Array.from(values));
    const fail = this.failNext;
    this.failNext = false;
    return new Promise((resolve, reject) => {
      const finish = () => {
        if (fail) return reject(new Error('boom'));
        const out = new Float32Array(values.map((v) => v + 1));
        resolve({
          outputs: outputNames.map((name) => ({ name, datatype: 'FP32', shape: input.shape, data: new Uint8Array(out.buffer) })),
          timings: { computeInputNs: 1000, computeInferNs: 5000, computeOutputNs: 1000 },
        });
      };
      if (this.autoFinish) queueMicrotask(finish);
      else this.pending.push(finish);
    });
  }
  get running(): number {
    return this.pending.length;
  }
  /** Completes the oldest run. */
  finish(): void {
    this.pending.shift()?.();
  }
  async close(): Promise<void> {}
}
