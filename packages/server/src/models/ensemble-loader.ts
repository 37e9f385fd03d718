import {
  describeStep,
  normalizeModelConfig,
  planEnsemble,
  validateDeclaredConfig,
  type EnsemblePlan,
  type EnsembleStep,
} from '../config/index.ts';
import { traceLineage } from '../config/ensemble-lineage.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { isDecoupled } from '../config/transaction-policy.ts';
import { Errors, toInferenceServerError } from '../errors/errors.ts';
import { VersionStatistics } from '../metrics/version-statistics.ts';
import type { ModelFolder } from '../repository/model-folder.ts';
import { EnsembleScheduler } from '../scheduler/ensemble-scheduler.ts';
import { dimsMatch, type BatchReshape, type EnsembleReshapes } from '../scheduler/ensemble-step.ts';
import type { DataType } from '../tensor/datatype.ts';
import type { LoadedVersion } from './loaded-version.ts';
import { checkConfigPaths, readLabels, type LoaderOptions } from './model-loader.ts';
import type { ModelRegistry } from './model-registry.ts';
import { inputSpecsOf, outputSpecsOf, tensorTables } from './tensor-specs.ts';

/**
 * Loads one version of an ensemble (`platform: "ensemble"`): no model file and no instances,
 * only its plan, checked against the step models that serve now. Each error names the
 * ensemble, the step and the tensor. A failed ensemble leaves its steps' models untouched.
 */
export async function loadEnsembleVersion(
  folder: ModelFolder,
  written: ModelConfig,
  version: number,
  options: LoaderOptions,
  registry: ModelRegistry,
): Promise<LoadedVersion> {
  const normalized = normalizeModelConfig(written, { visibleGpuIds: options.gpuIds });
  await checkConfigPaths(folder, normalized, version);
  validateDeclaredConfig(normalized);
  const plan = planEnsemble(normalized);
  const reshapes = checkAgainstSteps(normalized, plan, registry);
  const lineage = traceLineage(
    normalized.name,
    plan,
    normalized.input.map((i) => i.name),
    normalized.output.map((o) => o.name),
    (step) => isDecoupled(registry.resolve(step.modelName, step.modelVersion).config),
  );
  // As Triton does, an ensemble is decoupled exactly when a step is, whatever its config says.
  const config = { ...normalized, model_transaction_policy: { decoupled: lineage.decoupled } };
  const { callModel, streamModel } = options;
  if (!callModel || (lineage.decoupled && !streamModel))
    throw Errors.internal(`ensemble '${config.name}' cannot run its steps: the server gave the loader no request path`);
  const labels = await readLabels(folder, config);
  const inputs = inputSpecsOf(config, new Set());
  const outputs = outputSpecsOf(config, labels);
  const stats = new VersionStatistics(config.name, String(version), options.metrics);
  return {
    modelName: config.name,
    version: String(version),
    config,
    maxBatchSize: config.max_batch_size,
    ...tensorTables(inputs, outputs),
    instances: [],
    // Strings are held by the step models' instances, which check their own room.
    maxBatchStringHeapBytes: Infinity,
    scheduler: new EnsembleScheduler({
      ensembleName: config.name,
      plan,
      outputNames: outputs.map((o) => o.name),
      stats,
      callModel,
      ...(reshapes && { reshapes }),
      ...(lineage.decoupled && {
        streaming: { lineage, streamModel: streamModel!, ...(options.reserveMemory && { reserveMemory: options.reserveMemory }) },
      }),
    }),
    stats,
    executionProvider: '',
    fallbackReason: undefined,
    unappliedSettings: {},
    ensemble: plan,
  };
}

/** A tensor as one side of a connection sees it: datatype, dims, and whether that side batches. */
interface TensorView {
  readonly datatype: DataType;
  /** Without the batch dimension. */
  readonly dims: readonly number[];
  readonly batching: boolean;
  /** Who declares it, for the error: "ensemble input 'X'", "step 2 (model 'm') output 'Y'". */
  readonly owner: string;
}

/** A connection's reading side, and where to record how a tensor crosses to it. */
interface Consumer {
  readonly tensor: string;
  readonly view: TensorView;
  readonly record: (reshape: BatchReshape) => void;
}

/**
 * The checks that need the step models, as Triton's ensemble validation makes them: each step's
 * model serves, the ensemble's max_batch_size is within each step's, the maps name tensors the
 * step model has and cover the inputs it needs, and both sides of every connection agree on
 * datatype and shape (-1 matching any size; a batching side and a non-batching one agree when their
 * dims do, or when the non-batching side's dims are the other's with a batch dimension in front).
 * Returns how tensors cross where a batching side meets one that does not (undefined: nowhere).
 */
function checkAgainstSteps(config: ModelConfig, plan: EnsemblePlan, registry: ModelRegistry): EnsembleReshapes | undefined {
  const name = config.name;
  const produced = new Map<string, TensorView>();
  const ensembleBatching = config.max_batch_size > 0;
  for (const input of inputSpecsOf(config, new Set())) {
    produced.set(input.name, {
      datatype: input.datatype,
      dims: input.dims,
      batching: ensembleBatching,
      owner: `ensemble input '${input.name}'`,
    });
  }
  const consumers: Consumer[] = [];
  const stepInputs = new Map<EnsembleStep, (BatchReshape | undefined)[]>();
  for (const step of plan.steps) {
    const what = describeStep(name, step);
    let model: LoadedVersion;
    try {
      model = registry.resolve(step.modelName, step.modelVersion);
    } catch (error) {
      throw Errors.invalidArg(`${what}: the step's model is not available: ${toInferenceServerError(error).message}`);
    }
    if (model.ensemble) checkNotCyclic(name, step.modelName, registry, new Set([name]));
    if (config.response_cache?.enable && holdsSequences(model, registry)) {
      throw Errors.invalidArg(
        `${what}: model '${step.modelName}' keeps sequences (sequence_batching), so the answers of ensemble '${name}' ` +
          "depend on each sequence's state and its response_cache would give one sequence's answer to another: disable the response cache",
      );
    }
    if (config.max_batch_size > model.maxBatchSize) {
      throw Errors.invalidArg(
        `${what}: ensemble '${name}' allows maximum batch size ${config.max_batch_size}, but it contains model ` +
          `'${step.modelName}' which only allows maximum batch size to be ${model.maxBatchSize}`,
      );
    }
    const batching = model.maxBatchSize > 0;
    step.inputs.forEach(({ stepTensor, ensembleTensor }, index) => {
      const spec = model.inputsByName.get(stepTensor);
      if (!spec) {
        throw Errors.invalidArg(
          `${what}: input_map names '${stepTensor}', which is not an input of model '${step.modelName}' ` +
            `(its inputs: ${model.inputs.map((i) => `'${i.name}'`).join(', ')})`,
        );
      }
      consumers.push({
        tensor: ensembleTensor,
        view: {
          datatype: spec.datatype,
          dims: spec.dims,
          batching,
          owner: `step ${step.number} (model '${step.modelName}') input '${stepTensor}'`,
        },
        record: (reshape) => {
          let reshapes = stepInputs.get(step);
          if (!reshapes) stepInputs.set(step, (reshapes = step.inputs.map(() => undefined)));
          reshapes[index] = reshape;
        },
      });
    });
    const mapped = new Set(step.inputs.map((i) => i.stepTensor));
    const unmapped = model.inputs.filter((i) => !i.optional && !mapped.has(i.name));
    if (unmapped.length > 0) {
      throw Errors.invalidArg(`${what}: input_map does not map the model's input ${unmapped.map((i) => `'${i.name}'`).join(', ')}`);
    }
    for (const { stepTensor, ensembleTensor } of step.outputs) {
      const spec = model.outputsByName.get(stepTensor);
      if (!spec) {
        throw Errors.invalidArg(
          `${what}: output_map names '${stepTensor}', which is not an output of model '${step.modelName}' ` +
            `(its outputs: ${model.outputs.map((o) => `'${o.name}'`).join(', ')})`,
        );
      }
      produced.set(ensembleTensor, {
        datatype: spec.datatype,
        dims: spec.dims,
        batching,
        owner: `step ${step.number} (model '${step.modelName}') output '${stepTensor}'`,
      });
    }
  }
  const outputs: (BatchReshape | undefined)[] = [];
  outputSpecsOf(config, new Map()).forEach((output, index) => {
    outputs.push(undefined);
    consumers.push({
      tensor: output.name,
      view: { datatype: output.datatype, dims: output.dims, batching: ensembleBatching, owner: `ensemble output '${output.name}'` },
      record: (reshape) => (outputs[index] = reshape),
    });
  });
  let reshaped = false;
  for (const { tensor, view, record } of consumers) {
    const source = produced.get(tensor)!;
    if (source.datatype !== view.datatype) {
      throw Errors.invalidArg(
        `ensemble '${name}': tensor '${tensor}' is ${source.datatype} as ${source.owner} but ${view.datatype} as ${view.owner}`,
      );
    }
    if (!dimsMatch(source.dims, view.dims) && !dimsMatch(fullShape(source), fullShape(view))) {
      throw Errors.invalidArg(
        `ensemble '${name}': tensor '${tensor}' has shape ${formatShape(fullShape(source))} as ${source.owner} ` +
          `but ${formatShape(fullShape(view))} as ${view.owner}`,
      );
    }
    if (source.batching !== view.batching) {
      record({ add: view.batching, dims: view.dims });
      reshaped = true;
    }
  }
  return reshaped ? { stepInputs, outputs } : undefined;
}

/** A side's shape with its batch dimension (-1) when it batches. */
function fullShape(view: TensorView): readonly number[] {
  return view.batching ? [-1, ...view.dims] : view.dims;
}

/** Whether a step model keeps sequences: it has sequence_batching, or it is an ensemble one of whose steps does. */
function holdsSequences(model: LoadedVersion, registry: ModelRegistry): boolean {
  if (model.config.sequence_batching) return true;
  return (model.ensemble?.steps ?? []).some((step) => {
    let nested: LoadedVersion;
    try {
      nested = registry.resolve(step.modelName, step.modelVersion);
    } catch {
      return false;
    }
    return holdsSequences(nested, registry);
  });
}

/** An ensemble among the steps (nested ensembles are allowed) must not lead back to one on the path. */
function checkNotCyclic(name: string, stepModel: string, registry: ModelRegistry, path: Set<string>): void {
  if (path.has(stepModel)) throw Errors.invalidArg(`ensemble '${name}': its steps lead back to ensemble '${stepModel}': a cycle`);
  if (!registry.isModelReady(stepModel)) return;
  const nested = registry.resolve(stepModel).ensemble;
  if (!nested) return;
  const next = new Set([...path, stepModel]);
  for (const step of nested.steps) checkNotCyclic(name, step.modelName, registry, next);
}

function formatShape(shape: readonly number[]): string {
  return `[${shape.join(',')}]`;
}
