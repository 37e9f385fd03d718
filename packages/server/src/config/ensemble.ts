import { Errors } from '../errors/errors.ts';
import type { ModelConfig } from './model-config.ts';

/** One step of `ensemble_scheduling` as config.pbtxt writes it (model_config.proto's ModelEnsembling.Step). */
export interface EnsembleStepConfig {
  model_name?: string;
  /** -1 (or absent): the step model's highest ready version at the time each request runs it. */
  model_version?: number;
  /** Step model input name -> ensemble tensor name. */
  input_map?: Record<string, string>;
  /** Step model output name -> ensemble tensor name. */
  output_map?: Record<string, string>;
}

/** A step as the ensemble runs it: the step model's tensor names paired with the ensemble's. */
export interface EnsembleStep {
  /** Position in the config, from 1, as errors name it. */
  readonly number: number;
  readonly modelName: string;
  /** A fixed version, or undefined for the step model's latest ready one (model_version -1). */
  readonly modelVersion: string | undefined;
  readonly inputs: readonly { readonly stepTensor: string; readonly ensembleTensor: string }[];
  readonly outputs: readonly { readonly stepTensor: string; readonly ensembleTensor: string }[];
}

/** What an ensemble runs: its steps, checked to form a graph that can run (see planEnsemble). */
export interface EnsemblePlan {
  readonly steps: readonly EnsembleStep[];
  /** `max_inflight_requests`: each step's requests in flight across the ensemble's requests, at most; 0 for no limit. */
  readonly maxInflightRequests: number;
}

/** Triton's rule: `platform: "ensemble"`, or `backend: "ensemble"`, makes a model an ensemble. */
export function isEnsembleConfig(config: Pick<ModelConfig, 'platform' | 'backend'> | undefined): boolean {
  return config?.platform === 'ensemble' || config?.backend === 'ensemble';
}

/** The name errors use for a step: its number and model. */
export function describeStep(ensemble: string, step: Pick<EnsembleStep, 'number' | 'modelName'>): string {
  return `ensemble '${ensemble}' step ${step.number} (model '${step.modelName}')`;
}

/**
 * The ensemble's steps, after the checks that need only its own config (as Triton's
 * ValidateEnsembleConfig makes them): every step names a model and maps inputs and outputs;
 * no ensemble tensor is produced twice or is both a request input and a step output; every
 * tensor a step reads exists; every ensemble input is read and every ensemble output produced;
 * no cycle (which includes an ensemble that is its own step). Throws INVALID_ARG naming the
 * ensemble, the step and the tensor. The checks against the step models are the loader's.
 */
export function planEnsemble(config: ModelConfig): EnsemblePlan {
  const name = config.name;
  const fail = (message: string): never => {
    throw Errors.invalidArg(`ensemble '${name}': ${message}`);
  };
  const scheduling = config['ensemble_scheduling'] as { step?: EnsembleStepConfig[]; max_inflight_requests?: number } | undefined;
  const written = scheduling?.step ?? [];
  if (written.length === 0) fail('ensemble_scheduling must have at least one step');
  const steps = written.map((step, i): EnsembleStep => {
    const number = i + 1;
    if (!step.model_name) fail(`step ${number} has no model_name`);
    const modelName = step.model_name!;
    const what = describeStep(name, { number, modelName });
    if (modelName === name) fail(`step ${number} names the ensemble itself: a cycle`);
    const version = step.model_version ?? -1;
    if (!Number.isInteger(version) || version < -1 || version === 0) {
      throw Errors.invalidArg(`${what}: model_version ${version} must be -1 (latest) or a version number >= 1`);
    }
    const pairs = (map: Record<string, string> | undefined) =>
      Object.entries(map ?? {}).map(([stepTensor, ensembleTensor]) => ({ stepTensor, ensembleTensor }));
    const inputs = pairs(step.input_map);
    const outputs = pairs(step.output_map);
    if (inputs.length === 0) throw Errors.invalidArg(`${what}: input_map must map at least one input`);
    if (outputs.length === 0) throw Errors.invalidArg(`${what}: output_map must map at least one output`);
    return { number, modelName, modelVersion: version === -1 ? undefined : String(version), inputs, outputs };
  });

  const ensembleInputs = new Set(config.input.map((t) => t.name));
  const producer = new Map<string, EnsembleStep>();
  for (const step of steps) {
    for (const { stepTensor, ensembleTensor } of step.outputs) {
      if (ensembleInputs.has(ensembleTensor)) {
        fail(
          `step ${step.number} (model '${step.modelName}') output '${stepTensor}' is mapped to '${ensembleTensor}', which is an ensemble input`,
        );
      }
      const earlier = producer.get(ensembleTensor);
      if (earlier) {
        fail(
          `tensor '${ensembleTensor}' is produced twice: by step ${earlier.number} (model '${earlier.modelName}') and by step ${step.number} (model '${step.modelName}')`,
        );
      }
      producer.set(ensembleTensor, step);
    }
  }
  const read = new Set<string>();
  for (const step of steps) {
    for (const { stepTensor, ensembleTensor } of step.inputs) {
      read.add(ensembleTensor);
      if (!ensembleInputs.has(ensembleTensor) && !producer.has(ensembleTensor)) {
        fail(
          `step ${step.number} (model '${step.modelName}') input '${stepTensor}' reads tensor '${ensembleTensor}', ` +
            'which is neither an ensemble input nor produced by any step',
        );
      }
    }
  }
  for (const input of config.input) {
    if (!read.has(input.name)) fail(`ensemble input '${input.name}' is not read by any step`);
  }
  for (const output of config.output) {
    if (!producer.has(output.name)) fail(`ensemble output '${output.name}' is not produced by any step`);
  }
  checkAcyclic(name, steps, producer);
  return { steps, maxInflightRequests: scheduling?.max_inflight_requests ?? 0 };
}

/** Depth-first search over "step reads a tensor another step produces"; names the cycle it finds. */
function checkAcyclic(name: string, steps: readonly EnsembleStep[], producer: ReadonlyMap<string, EnsembleStep>): void {
  const state = new Map<EnsembleStep, 'visiting' | 'done'>();
  const path: EnsembleStep[] = [];
  const visit = (step: EnsembleStep): void => {
    if (state.get(step) === 'done') return;
    if (state.get(step) === 'visiting') {
      const cycle = [...path.slice(path.indexOf(step)), step].map((s) => `step ${s.number} (model '${s.modelName}')`);
      throw Errors.invalidArg(`ensemble '${name}': its steps form a cycle: ${cycle.join(' -> ')}`);
    }
    state.set(step, 'visiting');
    path.push(step);
    for (const { ensembleTensor } of step.inputs) {
      const from = producer.get(ensembleTensor);
      if (from) visit(from);
    }
    path.pop();
    state.set(step, 'done');
  };
  for (const step of steps) visit(step);
}
