import { Errors } from '../errors/errors.ts';
import type { EnsemblePlan, EnsembleStep } from './ensemble.ts';

/**
 * Where each step of an ensemble runs when some of its steps are decoupled. A lineage is a source of
 * tensor sets: lineage 0 is the request itself (its inputs, once), and each decoupled step starts a
 * lineage of its own, one tensor set per response it sends. A step runs once per tensor set of the
 * lineage its inputs come from; its outputs join that set, or, when it is decoupled, each of its
 * responses starts a set of its own lineage.
 */
export interface EnsembleLineage {
  /** Whether any step is decoupled: then the ensemble is decoupled (Triton marks its config so). */
  readonly decoupled: boolean;
  /** The steps that run in each lineage's tensor sets, by lineage, in config order. */
  readonly stepsIn: readonly (readonly EnsembleStep[])[];
  /** The lineage each decoupled step's responses start, by step. */
  readonly startedBy: ReadonlyMap<EnsembleStep, number>;
  /** The lineage whose tensor sets hold the ensemble's outputs: each one complete is one response. */
  readonly outputsIn: number;
  /** Whether a lineage's sets run decoupled steps of their own (a decoupled step feeding another), by lineage. */
  readonly nests: readonly boolean[];
}

/**
 * Triton's rule (ensemble_utils.cc ValidateEnsembleConfig): every step reads tensors of one lineage
 * only, and the ensemble's outputs come from one lineage, since a response of one decoupled step cannot
 * be paired with a response of another (or with the request's inputs). Throws INVALID_ARG naming the
 * step and the tensors that mix. `isDecoupled` says whether a step's model is decoupled.
 */
export function traceLineage(
  name: string,
  plan: EnsemblePlan,
  ensembleInputs: readonly string[],
  ensembleOutputs: readonly string[],
  isDecoupled: (step: EnsembleStep) => boolean,
): EnsembleLineage {
  /** Each ensemble tensor's lineage, and who made it, for the error. */
  const lineageOf = new Map<string, { lineage: number; origin: string }>();
  for (const input of ensembleInputs) lineageOf.set(input, { lineage: 0, origin: 'the request' });
  const stepsIn: EnsembleStep[][] = [[]];
  const startedBy = new Map<EnsembleStep, number>();
  const pending = new Set(plan.steps);
  // planEnsemble proved the graph acyclic and every read tensor produced: each round places a step.
  while (pending.size > 0) {
    const ready = [...pending].find((step) => step.inputs.every((i) => lineageOf.has(i.ensembleTensor)));
    if (!ready) throw Errors.internal(`ensemble '${name}': its steps cannot be ordered`);
    pending.delete(ready);
    const runsIn = sameLineage(
      ready.inputs.map((i) => ({ tensor: i.ensembleTensor, ...lineageOf.get(i.ensembleTensor)! })),
      (mixed) => `ensemble '${name}' step ${ready.number} (model '${ready.modelName}') reads ${mixed}`,
    );
    stepsIn[runsIn]!.push(ready);
    let produces = runsIn;
    if (isDecoupled(ready)) {
      produces = stepsIn.length;
      stepsIn.push([]);
      startedBy.set(ready, produces);
    }
    const origin = `the responses of step ${ready.number} (model '${ready.modelName}')`;
    for (const output of ready.outputs) {
      lineageOf.set(output.ensembleTensor, { lineage: produces, origin: produces === runsIn ? lineageOrigin(lineageOf, ready) : origin });
    }
  }
  const outputsIn = sameLineage(
    ensembleOutputs.map((tensor) => ({ tensor, ...lineageOf.get(tensor)! })),
    (mixed) => `ensemble '${name}': its outputs come from ${mixed}`,
  );
  // Steps in config order within each lineage: the order they are launched in when ready together.
  for (const steps of stepsIn) steps.sort((a, b) => a.number - b.number);
  const nests = stepsIn.map((steps) => steps.some((step) => startedBy.has(step)));
  return { decoupled: startedBy.size > 0, stepsIn, startedBy, outputsIn, nests };
}

/** The origin of a non-decoupled step's outputs: that of its inputs (all alike by then). */
function lineageOrigin(lineageOf: ReadonlyMap<string, { origin: string }>, step: EnsembleStep): string {
  return lineageOf.get(step.inputs[0]!.ensembleTensor)!.origin;
}

/** The one lineage of these tensors, or the error `describe` words for the two first ones that differ. */
function sameLineage(tensors: readonly { tensor: string; lineage: number; origin: string }[], describe: (mixed: string) => string): number {
  const first = tensors[0]!;
  const other = tensors.find((t) => t.lineage !== first.lineage);
  if (other) {
    throw Errors.invalidArg(
      describe(
        `'${first.tensor}' (from ${first.origin}) and '${other.tensor}' (from ${other.origin}); ` +
          'tensors that come from different decoupled steps, or from one and the request, cannot be paired (Triton: "receives inputs originated from different decoupled models")',
      ),
    );
  }
  return first.lineage;
}
