import { describe, expect, it } from 'vitest';
import { parseModelConfig } from '../../config/parse.ts';
import { printModelConfig } from '../../config/print.ts';
import { applyKnobs, candidateId, currentCandidateId, knobsCost, knobsOf, searchStages, type Knobs } from './candidates.ts';

const CONFIG = parseModelConfig(`name: "mlp"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]
parameters { key: "batchwise_dynamic_batching" value: { string_value: "false" } }
parameters { key: "enable_mem_arena" value: { string_value: "true" } }
`);
const CPU2 = { cpuCores: 2, gpuCount: 0 };

describe('knobs', () => {
  it('reads the current config, max_batch_size from the completed config', () => {
    expect(knobsOf(CONFIG, { ...CONFIG, max_batch_size: 8 })).toEqual({
      maxBatchSize: 8,
      preferredBatchSizes: [],
      maxQueueDelayUs: 0,
      instanceCount: 1,
      device: 'cpu',
      intraOpThreads: 0,
    });
  });

  it('names a current config that runs every request alone apart from the batching config of the same knobs', () => {
    const knobs = knobsOf(CONFIG, CONFIG);
    expect(currentCandidateId(knobs, CONFIG)).toBe(`${candidateId(knobs)} unbatched`);
    const batching = { ...CONFIG, dynamic_batching: {} };
    expect(currentCandidateId(knobs, batching)).toBe(candidateId(knobs));
    expect(currentCandidateId({ ...knobs, maxBatchSize: 0 }, { ...CONFIG, max_batch_size: 0 })).toBe(
      candidateId({ ...knobs, maxBatchSize: 0 }),
    );
  });

  it('writes a config that parses back to the same knobs and keeps the other parameters', () => {
    const knobs: Knobs = {
      maxBatchSize: 16,
      preferredBatchSizes: [8],
      maxQueueDelayUs: 500,
      instanceCount: 2,
      device: 'cpu',
      intraOpThreads: 1,
    };
    const text = printModelConfig(applyKnobs(CONFIG, knobs));
    const back = parseModelConfig(text);
    expect(knobsOf(back, back)).toEqual(knobs);
    expect(back.parameters).toEqual({ enable_mem_arena: { string_value: 'true' }, intra_op_thread_count: { string_value: '1' } });
    expect(candidateId(knobs)).toBe('cpu i2 t1 b16 d500us p[8]');
    expect(knobsCost(knobs, CPU2)).toBe(2);
  });

  it('names the CUDA accelerator for GPU instances', () => {
    const knobs: Knobs = {
      maxBatchSize: 8,
      preferredBatchSizes: [],
      maxQueueDelayUs: 0,
      instanceCount: 2,
      device: 'cuda',
      intraOpThreads: 0,
    };
    const config = applyKnobs(CONFIG, knobs);
    expect(config.instance_group).toEqual([{ kind: 'KIND_GPU', count: 2 }]);
    expect(config.optimization?.execution_accelerators?.gpu_execution_accelerator).toEqual([{ name: 'cuda' }]);
    expect(knobsOf(config, config).device).toBe('cuda');
    expect(applyKnobs(config, { ...knobs, device: 'cpu' }).optimization).toBeUndefined();
  });
});

describe('searchStages', () => {
  const start = knobsOf(CONFIG, CONFIG);
  it('on a CPU host: delays, instances x threads within the cores, batch sizes up to the top concurrency', () => {
    const stages = searchStages(CPU2, 32);
    expect(stages.map((s) => s.name)).toEqual(['queue delay', 'instances and threads', 'batch sizes']);
    expect(stages[0]!.variants(start).map((k) => k.maxQueueDelayUs)).toEqual([0, 500, 2000, 8000]);
    expect(stages[1]!.variants(start).map((k) => [k.instanceCount, k.intraOpThreads])).toEqual([
      [1, 0],
      [1, 2],
      [2, 1],
    ]);
    const sizes = stages[2]!.variants(start);
    expect(sizes.map((k) => k.maxBatchSize)).toEqual([4, 8, 16, 32, 32]);
    expect(sizes.at(-1)!.preferredBatchSizes).toEqual([32]);
  });

  it('on a GPU host: first CUDA against CPU, GPU instance counts, no thread sweep', () => {
    const stages = searchStages({ cpuCores: 16, gpuCount: 1 }, 16);
    expect(stages[0]!.name).toBe('accelerator');
    expect(stages[0]!.variants(start).map((k) => k.device)).toEqual(['cuda', 'cpu']);
    const instances = stages[2]!.variants({ ...start, device: 'cuda' });
    expect(instances.map((k) => [k.device, k.instanceCount, k.intraOpThreads])).toEqual([
      ['cuda', 1, 0],
      ['cuda', 2, 0],
      ['cuda', 3, 0],
    ]);
  });

  it('leaves the batching knobs alone for a model that does not batch', () => {
    const stages = searchStages(CPU2, 8);
    const flat = { ...start, maxBatchSize: 0 };
    expect(stages[0]!.variants(flat)).toEqual([]);
    expect(stages[2]!.variants(flat)).toEqual([]);
  });
});
