import { describe, expect, it } from 'vitest';
import { FakeClock, tick } from '../../../test-support/scheduler.ts';
import type { ExecutionResult, ModelInstance } from '../../backends/backend.ts';
import type { ModelConfig, ModelSequenceBatching } from '../../config/model-config.ts';
import { Errors, type InferenceServerError } from '../../errors/errors.ts';
import type { MemoryReservation } from '../../memory/memory-guard.ts';
import { ServerMetrics } from '../../metrics/server-metrics.ts';
import { VersionStatistics } from '../../metrics/version-statistics.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { SequenceScheduler } from './sequence-scheduler.ts';

/** A batch as the instance saw it: each input's values by name, row by row. */
type Batch = Record<string, number[]>;

function values(t: Tensor): number[] {
  const { buffer, byteOffset, byteLength } = t.data.slice();
  switch (t.datatype) {
    case 'FP32':
      return Array.from(new Float32Array(buffer, byteOffset, byteLength / 4));
    case 'INT32':
      return Array.from(new Int32Array(buffer, byteOffset, byteLength / 4));
    case 'UINT64':
      return Array.from(new BigUint64Array(buffer, byteOffset, byteLength / 8), Number);
    default:
      throw new Error(`no reader for ${t.datatype}`);
  }
}

/** OUTPUT0 = INPUT0 + STATE_IN (when the model has state), and STATE_OUT the same; runs end when the test says. */
class SequenceInstance implements ModelInstance {
  readonly batches: Batch[] = [];
  private readonly pending: (() => void)[] = [];
  onFatal: ((error: Error) => void) | undefined;

  execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    const batch: Batch = Object.fromEntries(inputs.map((t) => [t.name, values(t)]));
    this.batches.push(batch);
    const input = inputs.find((t) => t.name === 'INPUT0')!;
    const out = Float32Array.from(batch['INPUT0']!, (x, i) => x + (batch['STATE_IN']?.[i] ?? 0));
    return new Promise((resolve) =>
      this.pending.push(() =>
        resolve({
          outputs: outputNames.map((name) => ({ name, datatype: 'FP32', shape: input.shape, data: new Uint8Array(out.slice().buffer) })),
          timings: { computeInputNs: 0, computeInferNs: 1000, computeOutputNs: 0 },
        }),
      ),
    );
  }
  get running(): number {
    return this.pending.length;
  }
  finish(): void {
    this.pending.shift()?.();
  }
  async close(): Promise<void> {}
}

const CONTROLS: ModelSequenceBatching['control_input'] = [
  { name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START', int32_false_true: [0, 1] }] },
  { name: 'END', control: [{ kind: 'CONTROL_SEQUENCE_END', int32_false_true: [0, 1] }] },
  { name: 'READY', control: [{ kind: 'CONTROL_SEQUENCE_READY', int32_false_true: [0, 1] }] },
  { name: 'CORRID', control: [{ kind: 'CONTROL_SEQUENCE_CORRID', data_type: 'TYPE_UINT64' }] },
];

function harness(
  batcher: ModelSequenceBatching,
  {
    maxBatchSize = 2,
    instances = 1,
    reserveMemory,
  }: { maxBatchSize?: number; instances?: number; reserveMemory?: (bytes: number) => MemoryReservation } = {},
) {
  const config: ModelConfig = {
    name: 'm',
    max_batch_size: maxBatchSize,
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [1] }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [1] }],
    sequence_batching: { max_sequence_idle_microseconds: 1_000_000, control_input: CONTROLS, ...batcher },
  };
  const clock = new FakeClock();
  const models = Array.from({ length: instances }, () => new SequenceInstance());
  const metrics = new ServerMetrics({ processMetrics: false });
  const stats = new VersionStatistics('m', '1', metrics);
  const scheduler = new SequenceScheduler(
    { config, instances: models, outputNames: ['OUTPUT0'], stats, ...(reserveMemory && { reserveMemory }) },
    clock,
  );
  const answers: Record<string, (number | string)[]> = {};
  const send = (id: bigint | string, value: number, flags: { start?: boolean; end?: boolean; batchSize?: number } = {}) => {
    const key = String(id);
    const rows = flags.batchSize ?? 1;
    return scheduler
      .enqueue({
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [rows, 1], data: new Uint8Array(new Float32Array(rows).fill(value).buffer) }],
        batchSize: rows,
        priority: 0,
        timeoutMicroseconds: 0,
        arrivalNs: clock.nowNs(),
        sequence: { id, start: flags.start ?? false, end: flags.end ?? false },
      })
      .then(
        (outputs) => void (answers[key] ??= []).push(values(outputs[0]!)[0]!),
        (error: InferenceServerError) => void (answers[key] ??= []).push(`${error.code}: ${error.message}`),
      );
  };
  /** Lets settled promises run, ends the turn (deferred dispatch), and lets what that settled run. */
  const flush = async () => {
    await tick();
    clock.endTurn();
    await tick();
  };
  const finishAll = async () => {
    for (const model of models) while (model.running > 0) model.finish();
    await flush();
  };
  return { scheduler, clock, models, stats, metrics, send, answers, flush, finishAll };
}

describe('the sequence batcher, direct', () => {
  it('keeps each sequence in its slot, with a null request (READY 0) in a slot without one', async () => {
    const h = harness({});
    void h.send(7n, 1, { start: true });
    void h.send(8n, 10, { start: true });
    await h.flush();
    expect(h.models[0]!.batches).toEqual([{ INPUT0: [1, 10], START: [1, 1], END: [0, 0], READY: [1, 1], CORRID: [7, 8] }]);
    await h.finishAll();
    // 7 ends in slot 0; then 8 alone still runs in row 1 of its slot, row 0 a null request.
    void h.send(7n, 2, { end: true });
    await h.flush();
    await h.finishAll();
    void h.send(8n, 20);
    await h.flush();
    expect(h.models[0]!.batches.slice(1)).toEqual([
      { INPUT0: [2], START: [0], END: [1], READY: [1], CORRID: [7] },
      { INPUT0: [0, 20], START: [0, 0], END: [0, 0], READY: [0, 1], CORRID: [0, 8] },
    ]);
    await h.finishAll();
    expect(h.answers).toEqual({ '7': [1, 2], '8': [10, 20] });
  });

  it('runs the requests of one sequence in order, one per batch', async () => {
    const h = harness({});
    for (let i = 0; i < 3; i++) void h.send(5n, i, { start: i === 0, end: i === 2 });
    await h.flush();
    for (let i = 0; i < 3; i++) await h.finishAll();
    expect(h.models[0]!.batches.map((b) => b['INPUT0'])).toEqual([[0], [1], [2]]);
    expect(h.answers['5']).toEqual([0, 1, 2]);
  });

  it('puts a sequence that finds every slot taken in the backlog until an END frees one, first come first served', async () => {
    const h = harness({}, { maxBatchSize: 1 });
    void h.send(1n, 1, { start: true });
    void h.send(2n, 2, { start: true });
    void h.send(3n, 3, { start: true, end: true });
    void h.send(2n, 22, { end: true });
    await h.flush();
    expect((await h.metrics.sequenceBacklog.get()).values[0]?.value).toBe(2);
    await h.finishAll();
    expect(h.answers).toEqual({ '1': [1] });
    void h.send(1n, 11, { end: true });
    for (let i = 0; i < 5; i++) await h.finishAll();
    expect(h.models[0]!.batches.map((b) => [b['CORRID']![0], b['INPUT0']![0]])).toEqual([
      [1, 1],
      [1, 11],
      [2, 2],
      [2, 22],
      [3, 3],
    ]);
    expect(h.answers).toEqual({ '1': [1, 11], '2': [2, 22], '3': [3] });
  });

  it("refuses in Triton's words: no START, a zero id, batch size above 1, a START while stopping", async () => {
    const h = harness({});
    void h.send(9n, 1);
    void h.send(0n, 1, { start: true });
    void h.send('', 1, { start: true });
    void h.send(4n, 1, { start: true, batchSize: 2 });
    void h.send(6n, 1, { start: true });
    await h.flush();
    h.scheduler.stop();
    void h.send(10n, 1, { start: true });
    void h.send(6n, 2, { end: true });
    await h.flush();
    await h.finishAll();
    await h.finishAll();
    expect(h.answers).toEqual({
      '9': ["INVALID_ARG: inference request for sequence 9 to model 'm' must specify the START flag on the first request of the sequence"],
      '0': ["INVALID_ARG: inference request to model 'm' must specify a non-zero or non-empty correlation ID"],
      '': ["INVALID_ARG: inference request to model 'm' must specify a non-zero or non-empty correlation ID"],
      '4': ["INVALID_ARG: inference request to model 'm' must specify batch-size 1 due to requirements of sequence batcher"],
      '10': ['UNAVAILABLE: Server is stopping, scheduler for model has stopped accepting new inference requests'],
      '6': [1, 2],
    });
  });

  it('frees the slot of a sequence idle for max_sequence_idle_microseconds: the backlog takes it, and the sequence must START again', async () => {
    const h = harness({}, { maxBatchSize: 1 });
    void h.send('a', 1, { start: true });
    await h.flush();
    await h.finishAll();
    void h.send('b', 2, { start: true });
    h.clock.advanceMs(999);
    await h.flush();
    expect(h.models[0]!.batches).toHaveLength(1);
    h.clock.advanceMs(2);
    await h.flush();
    await h.finishAll();
    void h.send('a', 3);
    await h.flush();
    expect(h.answers).toEqual({
      a: [1, "INVALID_ARG: inference request for sequence a to model 'm' must specify the START flag on the first request of the sequence"],
      b: [2],
    });
    expect((await h.metrics.sequenceIdleReleases.get()).values[0]?.value).toBe(1);
  });

  it('waits with max_queue_delay_microseconds until minimum_slot_utilization of the slots is ready', async () => {
    const h = harness({ direct: { max_queue_delay_microseconds: 10_000, minimum_slot_utilization: 0.5 } }, { maxBatchSize: 4 });
    void h.send(1n, 1, { start: true });
    await h.flush();
    expect(h.models[0]!.batches).toHaveLength(0);
    h.clock.advanceMs(5);
    void h.send(2n, 2, { start: true });
    await h.flush();
    expect(h.models[0]!.batches.map((b) => b['INPUT0'])).toEqual([[1, 2]]);
    await h.finishAll();
    void h.send(1n, 3);
    await h.flush();
    expect(h.models[0]!.batches).toHaveLength(1);
    h.clock.advanceMs(10.1);
    await h.flush();
    expect(h.models[0]!.batches.map((b) => b['INPUT0'])).toEqual([[1, 2], [3]]);
  });

  it('spreads new sequences over the instances, lowest slot first', async () => {
    const h = harness({}, { instances: 2 });
    for (const id of [1n, 2n, 3n]) void h.send(id, Number(id), { start: true });
    await h.flush();
    expect(h.models.map((m) => m.batches.map((b) => b['CORRID']))).toEqual([[[1, 3]], [[2]]]);
  });
});

describe('implicit state', () => {
  const STATE: ModelSequenceBatching['state'] = [
    {
      input_name: 'STATE_IN',
      output_name: 'STATE_OUT',
      data_type: 'TYPE_FP32',
      dims: [1],
      initial_state: [{ name: 'zero', data_type: 'TYPE_FP32', dims: [1], zero_data: true }],
    },
  ];

  it("carries each sequence's state output to its next request, from the initial state on START", async () => {
    const h = harness({ state: STATE });
    void h.send(1n, 1, { start: true });
    void h.send(2n, 100, { start: true });
    await h.flush();
    await h.finishAll();
    void h.send(1n, 2);
    void h.send(2n, 200);
    await h.flush();
    await h.finishAll();
    void h.send(1n, 5, { start: true });
    await h.flush();
    await h.finishAll();
    expect(h.answers).toEqual({ '1': [1, 3, 5], '2': [100, 300] });
    expect(h.models[0]!.batches.map((b) => b['STATE_IN'])).toEqual([[0, 0], [1, 100], [0]]);
  });

  it('charges each state to the memory guard while its sequence holds a slot, and refuses a START over budget', async () => {
    let held = 0;
    const reserveMemory = (bytes: number): MemoryReservation => {
      if (held + bytes > 8) throw Errors.overMemoryBudget('over budget');
      held += bytes;
      let mine = bytes;
      return {
        get bytes() {
          return mine;
        },
        grow: (more) => void ((held += more), (mine += more)),
        release: () => void (held -= mine),
      };
    };
    const h = harness({ state: STATE }, { reserveMemory, maxBatchSize: 4 });
    void h.send(1n, 1, { start: true });
    void h.send(2n, 1, { start: true });
    void h.send(3n, 1, { start: true });
    await h.flush();
    expect(held).toBe(8);
    expect(h.answers['3']).toEqual(['RESOURCE_EXHAUSTED: over budget']);
    expect((await h.metrics.sequenceStateBytes.get()).values[0]?.value).toBe(8);
    await h.finishAll();
    void h.send(1n, 1, { end: true });
    await h.flush();
    expect(held).toBe(4);
  });
});

describe('the sequence batcher, oldest', () => {
  it('batches requests of different sequences, never two of one sequence', async () => {
    const h = harness({ oldest: { max_candidate_sequences: 4, preferred_batch_size: [4] } }, { maxBatchSize: 4 });
    void h.send(1n, 1, { start: true });
    void h.send(1n, 2);
    void h.send(2n, 10, { start: true });
    void h.send(2n, 20, { end: true });
    await h.flush();
    await h.flush();
    expect(h.models[0]!.batches).toEqual([{ INPUT0: [1, 10], START: [1, 1], END: [0, 0], READY: [1, 1], CORRID: [1, 2] }]);
    await h.finishAll();
    await h.flush();
    expect(h.models[0]!.batches[1]).toEqual({ INPUT0: [2, 20], START: [0, 0], END: [0, 1], READY: [1, 1], CORRID: [1, 2] });
    await h.finishAll();
    expect(h.answers).toEqual({ '1': [1, 2], '2': [10, 20] });
  });
});
