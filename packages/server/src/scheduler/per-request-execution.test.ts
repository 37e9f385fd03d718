import { describe, expect, it } from 'vitest';
import type { ExecutionResult, InstanceRequest, ModelInstance, RequestsResult, StreamEnd } from '../backends/backend.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { Errors } from '../errors/errors.ts';
import { ServerMetrics } from '../metrics/server-metrics.ts';
import { VersionStatistics } from '../metrics/version-statistics.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { BatchingScheduler } from './batching-scheduler.ts';
import type { QueuedRequest } from './scheduler.ts';
import { FakeClock, tick } from '../../test-support/scheduler.ts';

const TIMINGS = { computeInputNs: 1, computeInferNs: 2, computeOutputNs: 3 };

/** An instance that answers each request on its own: its first value echoed, a negative one an INVALID_ARG for it alone. */
class PerRequestInstance implements ModelInstance {
  readonly calls: InstanceRequest[][] = [];
  onFatal: ((error: Error) => void) | undefined;
  execute(): Promise<ExecutionResult> {
    throw new Error('the scheduler must call executeRequests');
  }
  async executeRequests(requests: readonly InstanceRequest[]): Promise<RequestsResult> {
    this.calls.push([...requests]);
    return {
      responses: requests.map((r) => {
        const value = new Float32Array(r.inputs[0]!.data.slice().buffer)[0]!;
        if (value < 0) return { error: Errors.invalidArg(`negative ${value}`) };
        return { outputs: r.outputNames.map((name) => ({ ...r.inputs[0]!, name })) };
      }),
      timings: TIMINGS,
    };
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** A request of one FP32 row holding `value`, arriving now. */
function oneRow(value: number, clock: FakeClock): QueuedRequest {
  const input: Tensor = { name: 'X', datatype: 'FP32', shape: [1, 1], data: new Uint8Array(Float32Array.of(value).buffer) };
  return { inputs: [input], batchSize: 1, priority: 0, timeoutMicroseconds: 0, arrivalNs: clock.nowNs() };
}

describe('BatchingScheduler with an instance that runs requests on their own', () => {
  it('hands the batch over request by request and rejects only the requests that failed', async () => {
    const config: ModelConfig = {
      name: 'm',
      max_batch_size: 8,
      input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [1] }],
      output: [
        { name: 'A', data_type: 'TYPE_FP32', dims: [1] },
        { name: 'B', data_type: 'TYPE_FP32', dims: [1] },
      ],
      dynamic_batching: {},
    };
    const clock = new FakeClock();
    const instance = new PerRequestInstance();
    const stats = new VersionStatistics('m', '1', new ServerMetrics({ processMetrics: false }));
    const scheduler = new BatchingScheduler({ config, instances: [instance], outputNames: ['A', 'B'], stats }, undefined, clock);
    const send = (value: number, outputNames?: string[]) => {
      return scheduler
        .enqueue({
          ...oneRow(value, clock),
          id: `r${value}`,
          parameters: { p: value },
          ...(outputNames && { outputNames }),
        })
        .then(
          (outputs) => outputs.map((o) => o.name),
          (error: Error) => error.message,
        );
    };
    const answers = Promise.all([send(1), send(-2), send(3, ['B'])]);
    clock.endTurn();
    await tick();
    expect(await answers).toEqual([['A', 'B'], 'negative -2', ['B']]);
    expect(instance.calls).toHaveLength(1);
    expect(instance.calls[0]!.map((r) => [r.id, r.outputNames, r.parameters])).toEqual([
      ['r1', ['A', 'B'], { p: 1 }],
      ['r-2', ['A', 'B'], { p: -2 }],
      ['r3', ['B'], { p: 3 }],
    ]);
    const snapshot = stats.snapshot();
    expect(snapshot.execution_count).toBe(1);
    expect(snapshot.inference_stats.success.count).toBe(2);
    expect(snapshot.inference_stats.fail.count).toBe(1);
  });
});

/** A decoupled instance: each request ends when the test says, and the batch returns when the test says. */
class DecoupledInstance implements ModelInstance {
  readonly ends: ((end: StreamEnd) => void)[] = [];
  returnBatch: (() => void) | undefined;
  onFatal: ((error: Error) => void) | undefined;
  execute(): Promise<ExecutionResult> {
    throw new Error('the scheduler must call executeRequests');
  }
  executeRequests(requests: readonly InstanceRequest[]): Promise<RequestsResult> {
    const responses = requests.map(() => ({ ended: new Promise<StreamEnd>((end) => this.ends.push(end)) }));
    return new Promise((resolve) => (this.returnBatch = () => resolve({ responses, timings: TIMINGS })));
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

describe('BatchingScheduler with a decoupled instance', () => {
  const config: ModelConfig = {
    name: 'd',
    max_batch_size: 8,
    input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [1] }],
    output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [1] }],
    dynamic_batching: {},
    model_transaction_policy: { decoupled: true },
  };

  async function oneRequest() {
    const clock = new FakeClock();
    const instance = new DecoupledInstance();
    const metrics = new ServerMetrics({ processMetrics: false });
    const stats = new VersionStatistics('d', '1', metrics);
    const scheduler = new BatchingScheduler({ config, instances: [instance], outputNames: ['Y'], stats }, undefined, clock);
    const client = new AbortController();
    const answer = scheduler
      .enqueue({
        ...oneRow(0, clock),
        signal: client.signal,
        responses: { send: () => Promise.resolve() },
      })
      .then(
        () => 'ended',
        (error: Error) => error.message,
      );
    clock.endTurn();
    await tick();
    const canceled = async () => (await metrics.registry.getSingleMetric('nv_inference_request_failure')!.get()).values;
    return { instance, client, answer, stats, canceled };
  }

  it('counts a request whose final flag was sent a success, though its client went away before the batch returned', async () => {
    const { instance, client, answer, stats, canceled } = await oneRequest();
    instance.ends[0]!({});
    client.abort();
    instance.returnBatch!();
    expect(await answer).toBe('ended');
    expect(stats.snapshot().inference_stats).toMatchObject({ success: { count: 1 }, fail: { count: 0 } });
    expect((await canceled()).filter((v) => v.labels.reason === 'CANCELED' && v.value > 0)).toEqual([]);
  });

  it('counts a request its cancellation ended CANCELED', async () => {
    const { instance, client, answer, stats, canceled } = await oneRequest();
    client.abort();
    instance.ends[0]!({ error: Errors.cancelled() });
    instance.returnBatch!();
    expect(await answer).toMatch(/cancel/i);
    expect(stats.snapshot().inference_stats).toMatchObject({ success: { count: 0 }, fail: { count: 1 } });
    expect((await canceled()).filter((v) => v.labels.reason === 'CANCELED').map((v) => v.value)).toEqual([1]);
  });
});
