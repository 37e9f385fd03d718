import { InferenceServerError } from '../errors/errors.ts';
import { CONFIG_TYPE_TO_DATATYPE, type DataType } from '../tensor/datatype.ts';
import type { ModelConfig, ModelSequenceBatching, ModelSequenceControl } from './model-config.ts';
import type { ModelIO } from './model-io.ts';
import { WILDCARD_DIM } from './shape-rules.ts';

/**
 * `sequence_batching` read as Triton's sequence batcher reads it (core model_config_utils.cc
 * GetBooleanSequenceControlProperties, GetTypedSequenceControlProperties, ValidateModelConfig and
 * sequence_batch_scheduler.cc GenerateInitialStateData): the control inputs, the implicit states and
 * the checks, whose messages are Triton's own (its tests and users match on them).
 */

/** Triton's SEQUENCE_IDLE_DEFAULT_MICROSECONDS: an idle sequence's slot is freed after one second by default. */
export const SEQUENCE_IDLE_DEFAULT_MICROSECONDS = 1_000_000;

type Kind = NonNullable<ModelSequenceControl['kind']>;

/** START, END or READY: a tensor whose elements are `falseValue` or `trueValue`. */
export interface BooleanControl {
  readonly name: string;
  readonly datatype: 'INT32' | 'FP32' | 'BOOL';
  readonly falseValue: number;
  readonly trueValue: number;
}

/** CORRID: each slot's correlation id, in one of the datatypes Triton allows. */
export interface CorridControl {
  readonly name: string;
  readonly datatype: CorridDatatype;
}

export const CORRID_DATATYPES = ['UINT64', 'INT64', 'UINT32', 'INT32', 'BYTES'] as const;
export type CorridDatatype = (typeof CORRID_DATATYPES)[number];

export interface SequenceControls {
  readonly start?: BooleanControl;
  readonly end?: BooleanControl;
  readonly ready?: BooleanControl;
  readonly corrid?: CorridControl;
}

/** One implicit state: the output of one request that becomes the input of the sequence's next. */
export interface SequenceStateSpec {
  readonly inputName: string;
  readonly outputName: string;
  readonly datatype: DataType;
  /** Without the batch dimension; -1 is variable. */
  readonly dims: readonly number[];
  /** initial_state: its fixed dims, zeros or a file under `<model>/initial_state/`; undefined: zeros, variable dims 1. */
  readonly initial?: { readonly dims: readonly number[] } & ({ readonly zero: true } | { readonly dataFile: string });
}

const fail = (message: string): never => {
  throw new InferenceServerError('INVALID_ARG', message);
};

/** The controls a config asks for; throws Triton's errors for a malformed control_input. */
export function sequenceControlsOf(config: ModelConfig): SequenceControls {
  const batcher = config.sequence_batching ?? {};
  const start = booleanControl(batcher, config.name, 'CONTROL_SEQUENCE_START');
  const end = booleanControl(batcher, config.name, 'CONTROL_SEQUENCE_END');
  const ready = booleanControl(batcher, config.name, 'CONTROL_SEQUENCE_READY');
  const corrid = corridControl(batcher, config.name);
  return { ...(start && { start }), ...(end && { end }), ...(ready && { ready }), ...(corrid && { corrid }) };
}

/** The control of `kind`, if any, after the checks every lookup makes (names, one tensor per kind and kind per tensor). */
function controlOf(batcher: ModelSequenceBatching, model: string, kind: Kind): { name: string; control: ModelSequenceControl } | undefined {
  const seen = new Set<string>();
  let found: { name: string; control: ModelSequenceControl } | undefined;
  for (const input of batcher.control_input ?? []) {
    const name = input.name ?? '';
    if (name === '') fail(`sequence batching control tensor must have a name for ${model}`);
    if (seen.has(name)) fail(`sequence batching control tensor '${name}' is specified for multiple control kinds for ${model}`);
    seen.add(name);
    for (const control of input.control ?? []) {
      if ((control.kind ?? 'CONTROL_SEQUENCE_START') !== kind) continue;
      if (found) fail(`sequence batching specifies multiple ${kind} tensors for ${model}`);
      found = { name, control };
    }
  }
  return found;
}

function booleanControl(batcher: ModelSequenceBatching, model: string, kind: Kind): BooleanControl | undefined {
  const found = controlOf(batcher, model, kind);
  if (!found) return undefined;
  const { int32_false_true: ints = [], fp32_false_true: floats = [], bool_false_true: bools = [] } = found.control;
  const given = [ints, floats, bools].filter((values) => values.length > 0);
  if (given.length === 0) {
    fail(`sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for ${kind} for ${model}`);
  }
  if (given.length > 1) {
    fail(
      `sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and 'bool_false_true' for ${kind} for ${model}`,
    );
  }
  const [field, datatype, values] =
    ints.length > 0
      ? (['int32_false_true', 'INT32', ints] as const)
      : floats.length > 0
        ? (['fp32_false_true', 'FP32', floats] as const)
        : (['bool_false_true', 'BOOL', bools.map(Number)] as const);
  if (values.length !== 2) fail(`sequence batching control '${field}' must have exactly 2 entries for ${kind} for ${model}`);
  return { name: found.name, datatype, falseValue: values[0]!, trueValue: values[1]! };
}

function corridControl(batcher: ModelSequenceBatching, model: string): CorridControl | undefined {
  const kind = 'CONTROL_SEQUENCE_CORRID';
  const found = controlOf(batcher, model, kind);
  if (!found) return undefined;
  const { control } = found;
  if (control.int32_false_true?.length || control.fp32_false_true?.length || control.bool_false_true?.length) {
    fail(`sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for ${kind} for ${model}`);
  }
  const datatype = CONFIG_TYPE_TO_DATATYPE[control.data_type ?? 'TYPE_INVALID'];
  if (!(CORRID_DATATYPES as readonly string[]).includes(datatype ?? '')) {
    fail(
      `unexpected data type for control ${kind} for ${model}. Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING`,
    );
  }
  return { name: found.name, datatype: datatype as CorridDatatype };
}

/** The implicit states; throws Triton's errors (GenerateInitialStateData) for a malformed `state`. */
export function sequenceStatesOf(config: ModelConfig): SequenceStateSpec[] {
  const seen = new Set<string>();
  return (config.sequence_batching?.state ?? []).map((state) => {
    const inputName = state.input_name ?? '';
    const outputName = state.output_name ?? '';
    if (inputName === '' || outputName === '') {
      fail(`sequence batching state of ${config.name} must name both its input_name and its output_name`);
    }
    if (seen.has(inputName)) fail(`State input name '${inputName}' specified more than once.`);
    seen.add(inputName);
    const datatype = CONFIG_TYPE_TO_DATATYPE[state.data_type ?? 'TYPE_INVALID'];
    if (datatype === undefined || datatype === 'BYTES') {
      fail(
        `sequence batching state '${inputName}' of ${config.name} has data_type ${state.data_type ?? 'TYPE_INVALID'}: a fixed-size numeric or BOOL type is needed`,
      );
    }
    const dims = state.dims ?? [];
    const initials = state.initial_state ?? [];
    if (initials.length > 1) {
      fail(
        `initial_state field for state input '${inputName}' must contain exactly one or zero element. Found '${initials.length}' elements.`,
      );
    }
    const spec = { inputName, outputName, datatype: datatype!, dims };
    const initial = initials[0];
    if (!initial) return spec;
    if (initial.data_type !== state.data_type) {
      fail(`The data type used for 'initial_state' field of state '${inputName}' does not match the state data type.`);
    }
    if (!initial.name) fail(`Field 'name' must be set when using initial_state for state input '${inputName}'.`);
    const initialDims = initial.dims ?? [];
    if (initialDims.length !== dims.length) {
      fail(
        `Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state input '${inputName}'. ${initialDims.length} != ${dims.length}`,
      );
    }
    initialDims.forEach((d, i) => {
      if (d === WILDCARD_DIM) fail(`'initial_state' field for state input name '${inputName}' contains variable dimensions.`);
      if (dims[i] !== WILDCARD_DIM && d !== dims[i]) {
        fail(`'initial_state' dim for input name '${inputName}' doesn't match 'state' dim description. ${d} != ${dims[i]}`);
      }
    });
    if (initial.data_file) return { ...spec, initial: { dims: initialDims, dataFile: initial.data_file } };
    if (initial.zero_data) return { ...spec, initial: { dims: initialDims, zero: true as const } };
    return fail(`initial_state setting expects state'${inputName}' to have state_data set`);
  });
}

/** The model inputs the sequence batcher feeds (controls and states) and the state outputs it takes: never asked of requests. */
export function sequenceTensorNames(config: ModelConfig): { inputs: ReadonlySet<string>; outputs: ReadonlySet<string> } {
  const batcher = config.sequence_batching;
  if (!batcher) return { inputs: new Set(), outputs: new Set() };
  const inputs = new Set<string>();
  for (const control of batcher.control_input ?? []) if (control.name) inputs.add(control.name);
  const outputs = new Set<string>();
  for (const state of batcher.state ?? []) {
    if (state.input_name) inputs.add(state.input_name);
    if (state.output_name) outputs.add(state.output_name);
  }
  return { inputs, outputs };
}

/** Triton's normalization: the default idle time, and oldest's preferred batch size max_batch_size when none is given. */
export function normalizeSequenceBatching(batcher: ModelSequenceBatching, maxBatchSize: number): ModelSequenceBatching {
  const out = { ...batcher };
  if (!out.max_sequence_idle_microseconds) out.max_sequence_idle_microseconds = SEQUENCE_IDLE_DEFAULT_MICROSECONDS;
  if (out.oldest && !out.oldest.preferred_batch_size?.length && maxBatchSize > 0) {
    out.oldest = { ...out.oldest, preferred_batch_size: [maxBatchSize] };
  }
  return out;
}

/**
 * Checks `sequence_batching` as Triton's ValidateModelConfig does, plus what the backend must
 * offer: each control and state input is an input of the model (`io`) of the control's datatype, each
 * state output an output; implicit state only for ONNX models, as Triton's Python backend has none.
 */
export function validateSequenceBatching(config: ModelConfig, io: ModelIO | undefined): void {
  const batcher = config.sequence_batching;
  if (!batcher) return;
  if (config.dynamic_batching || config['ensemble_scheduling']) {
    fail(
      `model '${config.name}' has sequence_batching and ${config.dynamic_batching ? 'dynamic_batching' : 'ensemble_scheduling'}: a model has one scheduler`,
    );
  }
  if (config.response_cache?.enable) {
    fail(
      `Response Cache does not currently support model ${config.name} with sequence batching scheduler. Please disable the response cache.`,
    );
  }
  if ((config['model_transaction_policy'] as { decoupled?: boolean } | undefined)?.decoupled) {
    fail(
      `model '${config.name}': a decoupled model (model_transaction_policy) cannot have sequence_batching here: each request of a sequence is answered once`,
    );
  }
  if (batcher.iterative_sequence) {
    fail(`model '${config.name}': sequence_batching.iterative_sequence is not supported (Triton marks it provisional)`);
  }
  const controls = sequenceControlsOf(config);
  for (const size of batcher.oldest?.preferred_batch_size ?? []) {
    if (size <= 0) fail(`sequence batching preferred batch size must be positive for ${config.name}`);
    if (size > config.max_batch_size) fail(`sequence batching preferred batch size must be <= max batch size for ${config.name}`);
  }
  const utilization = batcher.direct?.minimum_slot_utilization ?? 0;
  if (utilization < 0 || utilization > 1) fail(`sequence batching minimum slot utilization must be in range (0.0, 1.0] for ${config.name}`);
  const states = sequenceStatesOf(config);
  if (states.length > 0 && config.backend === 'js') {
    fail(
      `model '${config.name}': implicit state (sequence_batching.state) needs backend support, which ONNX models have and JavaScript models do not: keep the state in the model's code`,
    );
  }
  if (!io || config.backend === 'js') return;
  const input = (name: string, datatype: DataType, what: string) => {
    const found = io.inputs.find((t) => t.name === name);
    if (!found)
      fail(
        `model '${config.name}': ${what} '${name}' is not an input of the model (model inputs: ${io.inputs.map((t) => `'${t.name}'`).join(', ')})`,
      );
    if (found!.datatype !== datatype)
      fail(`model '${config.name}': ${what} '${name}' is ${datatype} in the config, but the model's input is ${found!.datatype}`);
  };
  for (const [what, control] of Object.entries(controls))
    input(control.name, control.datatype, `sequence batching control ${what.toUpperCase()}`);
  for (const state of states) {
    input(state.inputName, state.datatype, 'state input');
    const output = io.outputs.find((t) => t.name === state.outputName);
    if (!output)
      fail(
        `model '${config.name}': state output '${state.outputName}' is not an output of the model (model outputs: ${io.outputs.map((t) => `'${t.name}'`).join(', ')})`,
      );
    if (output!.datatype !== state.datatype)
      fail(
        `model '${config.name}': state output '${state.outputName}' is ${state.datatype} in the config, but the model's output is ${output!.datatype}`,
      );
  }
}
