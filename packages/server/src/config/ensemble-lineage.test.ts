import { describe, expect, it } from 'vitest';
import type { ModelConfig } from './model-config.ts';
import { planEnsemble, type EnsembleStep } from './ensemble.ts';
import { traceLineage } from './ensemble-lineage.ts';

/** An ensemble of steps written as [model, input_map, output_map], its inputs and outputs INT32 [1]. */
function lineageOf(
  inputs: string[],
  outputs: string[],
  steps: [string, Record<string, string>, Record<string, string>][],
  decoupled: string[],
) {
  const tensor = (name: string) => ({ name, data_type: 'TYPE_INT32', dims: [1] });
  const config = {
    name: 'e',
    platform: 'ensemble',
    max_batch_size: 0,
    input: inputs.map(tensor),
    output: outputs.map(tensor),
    ensemble_scheduling: { step: steps.map(([model_name, input_map, output_map]) => ({ model_name, input_map, output_map })) },
  } as unknown as ModelConfig;
  const plan = planEnsemble(config);
  const lineage = traceLineage('e', plan, inputs, outputs, (step: EnsembleStep) => decoupled.includes(step.modelName));
  return { ...lineage, stepsIn: lineage.stepsIn.map((steps) => steps.map((s) => s.modelName)) };
}

describe('traceLineage', () => {
  it('no decoupled step: one lineage, the ensemble is not decoupled', () => {
    expect(
      lineageOf(
        ['A'],
        ['C'],
        [
          ['m1', { X: 'A' }, { Y: 'B' }],
          ['m2', { X: 'B' }, { Y: 'C' }],
        ],
        [],
      ),
    ).toMatchObject({
      decoupled: false,
      stepsIn: [['m1', 'm2']],
      outputsIn: 0,
      nests: [false],
    });
  });

  it('a decoupled step starts a lineage: the steps after it run in it, and so do the outputs', () => {
    const lineage = lineageOf(
      ['A', 'M'],
      ['TEXT'],
      [
        ['tokenize', { X: 'A' }, { Y: 'ids' }],
        ['generate', { X: 'ids', N: 'M' }, { Y: 'token' }],
        ['detokenize', { X: 'token' }, { Y: 'TEXT' }],
      ],
      ['generate'],
    );
    expect(lineage).toMatchObject({
      decoupled: true,
      stepsIn: [['tokenize', 'generate'], ['detokenize']],
      outputsIn: 1,
      nests: [true, false],
    });
  });

  it('a decoupled step feeding another: nested lineages; a fan-out that meets again stays in one', () => {
    expect(
      lineageOf(
        ['A'],
        ['OUT'],
        [
          ['repeat', { X: 'A' }, { Y: 'r' }],
          ['square', { X: 'r' }, { Y: 'OUT' }],
        ],
        ['repeat', 'square'],
      ),
    ).toMatchObject({ stepsIn: [['repeat'], ['square'], []], outputsIn: 2, nests: [true, true, false] });
    expect(
      lineageOf(
        ['A'],
        ['OUT'],
        [
          ['repeat', { X: 'A' }, { Y: 'r' }],
          ['identity', { X: 'r' }, { Y: 'i' }],
          ['add', { X: 'r', Z: 'i' }, { Y: 'OUT' }],
        ],
        ['repeat'],
      ),
    ).toMatchObject({ stepsIn: [['repeat'], ['identity', 'add']], outputsIn: 1 });
  });

  it("refuses a step reading two decoupled steps' responses, or one's and the request's, and outputs of two lineages", () => {
    const pairs = () =>
      lineageOf(
        ['A'],
        ['OUT'],
        [
          ['r1', { X: 'A' }, { Y: 'a' }],
          ['r2', { X: 'A' }, { Y: 'b' }],
          ['add', { X: 'a', Z: 'b' }, { Y: 'OUT' }],
        ],
        ['r1', 'r2'],
      );
    expect(pairs).toThrow(
      "ensemble 'e' step 3 (model 'add') reads 'a' (from the responses of step 1 (model 'r1')) and 'b' (from the responses of step 2 (model 'r2'))",
    );
    const withRequest = () =>
      lineageOf(
        ['A'],
        ['OUT'],
        [
          ['r1', { X: 'A' }, { Y: 'a' }],
          ['add', { X: 'a', Z: 'A' }, { Y: 'OUT' }],
        ],
        ['r1'],
      );
    expect(withRequest).toThrow("reads 'a' (from the responses of step 1 (model 'r1')) and 'A' (from the request)");
    const outputs = () =>
      lineageOf(
        ['A'],
        ['O1', 'O2'],
        [
          ['r1', { X: 'A' }, { Y: 'O1' }],
          ['m', { X: 'A' }, { Y: 'O2' }],
        ],
        ['r1'],
      );
    expect(outputs).toThrow(
      "ensemble 'e': its outputs come from 'O1' (from the responses of step 1 (model 'r1')) and 'O2' (from the request)",
    );
  });
});
