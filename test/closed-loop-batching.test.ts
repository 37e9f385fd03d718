/**
 * The adaptive delay's population rule (batch-choice.ts, `populationOf` in recent-window.ts) end to end,
 * against ONNX Runtime in-process: 8 closed-loop clients of a model whose max_queue_delay (400 ms) is far
 * longer than a batch takes. Over its first 32 arrivals the delay's other rules decide (the first round
 * waits it out; without the population rule, most later rounds do too); after that a batch of the 8 goes
 * as the last of them arrives. Every answer equals the reference's, bit for bit, whichever batch it was in.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serializeModel } from '@batchwise/modelgen';
import { configText, differences, onnxModel, Reference, resultValues, type ModelSpec, type TensorValue } from './support/differential.ts';
import { getJson, serveModels, type ServedModels } from './support/server.ts';

const SPEC: ModelSpec = {
  name: 'loop',
  maxBatchSize: 16,
  inputs: [
    { name: 'A', datatype: 'FP32', dims: [4] },
    { name: 'B', datatype: 'FP32', dims: [4] },
  ],
  outputs: [{ name: 'Y', datatype: 'FP32', dims: [4] }],
  graph: (g) => {
    g.op('Mul', ['A', 'B'], 'AB');
    g.op('Add', ['AB', 'A'], 'Y');
  },
};
const DELAY_MS = 400;
const CLIENTS = 8;
const ROUNDS = 10;
/** Rounds whose batches wait the delay out: the first 32 arrivals, 8 a round. */
const LEARNING_ROUNDS = 32 / CLIENTS;

describe('closed-loop clients with a long queue delay (differential)', () => {
  let served: ServedModels;
  let reference: Reference;

  beforeAll(async () => {
    const model = onnxModel(SPEC);
    const config = configText(SPEC).replace(/max_queue_delay_microseconds: \d+/, `max_queue_delay_microseconds: ${DELAY_MS * 1000}`);
    served = await serveModels([{ name: SPEC.name, model, config }]);
    reference = await Reference.create(SPEC, serializeModel(model));
  });
  afterAll(async () => {
    await served?.close();
  });

  it('batches the whole population once known, without waiting the delay out; every answer is ONNX Runtime’s', async () => {
    let seed = 44;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 8 - 4;
    const tensor = (name: string): TensorValue => ({
      name,
      datatype: 'FP32',
      shape: [1, 4],
      data: Float32Array.from({ length: 4 }, random),
    });
    const roundMs: number[] = [];
    const found: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const started = performance.now();
      // A closed loop in rounds: each client sends its next request once every answer of the round is in.
      await Promise.all(
        Array.from({ length: CLIENTS }, async (_, client) => {
          const inputs = [tensor('A'), tensor('B')];
          const [result, expected] = await Promise.all([
            served.client.infer({ model: SPEC.name, inputs: inputs.map((t) => ({ ...t, data: t.data as Float32Array })) }),
            reference.run({ model: SPEC.name, inputs }),
          ]);
          for (const d of differences(expected, resultValues(result), { fp16: true, floats: 'bits', bytes: 'any' }))
            found.push(`round ${round} client ${client}: ${d}`);
        }),
      );
      roundMs.push(performance.now() - started);
    }
    expect(found).toEqual([]);
    const took = `rounds took ${roundMs.map(Math.round).join(', ')} ms`;
    // While the model learns its traffic, the first round waits the delay out (no arrival gap yet), and later ones may
    // too; once it has seen 32 arrivals, none does (a round on a loaded runner takes tens of milliseconds).
    expect(roundMs[0], took).toBeGreaterThanOrEqual(DELAY_MS * 0.9);
    for (const ms of roundMs.slice(LEARNING_ROUNDS)) expect(ms, took).toBeLessThan(DELAY_MS / 2);
    const stats = (await getJson(`${served.server.url}/v2/models/${SPEC.name}/stats`)).model_stats[0];
    expect(stats.inference_count).toBe(CLIENTS * ROUNDS);
    // Each of those rounds in one batch of the 8.
    const ofEight = stats.batch_stats.find((b: { batch_size: number }) => b.batch_size === CLIENTS)?.compute_infer.count ?? 0;
    expect(ofEight, took).toBeGreaterThanOrEqual(ROUNDS - LEARNING_ROUNDS);
  });
});
