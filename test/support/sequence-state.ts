/**
 * The config of @batchwise/modelgen's sequenceStateModel (a sum and a step count per sequence, in
 * implicit state): every control (FP32 START, END, READY; CORRID of `corrid`) and both states.
 */
export interface SequenceStateConfig {
  readonly name: string;
  readonly width: number;
  /** The strategy block: `direct { }`, `oldest { ... }`. */
  readonly strategy: string;
  readonly corrid: 'TYPE_UINT64' | 'TYPE_STRING';
  readonly maxBatchSize: number;
  readonly instances: number;
  readonly idleMs: number;
}

const fp32Control = (name: string, kind: string) => `{ name: "${name}" control [ { kind: ${kind} fp32_false_true: [ 0, 1 ] } ] }`;

export function sequenceStateConfig(c: SequenceStateConfig): string {
  return `name: "${c.name}"
max_batch_size: ${c.maxBatchSize}
sequence_batching {
  max_sequence_idle_microseconds: ${c.idleMs * 1000}
  ${c.strategy}
  control_input [
    ${fp32Control('START', 'CONTROL_SEQUENCE_START')},
    ${fp32Control('END', 'CONTROL_SEQUENCE_END')},
    ${fp32Control('READY', 'CONTROL_SEQUENCE_READY')},
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: ${c.corrid} } ] }
  ]
  state [
    { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ ${c.width} ]
      initial_state: { name: "zeros" data_type: TYPE_FP32 dims: [ ${c.width} ] zero_data: true } },
    { input_name: "STEP_IN" output_name: "STEP_OUT" data_type: TYPE_INT32 dims: [ 1 ] }
  ]
}
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ ${c.width} ] } ]
output [
  { name: "OUTPUT" data_type: TYPE_FP32 dims: [ ${c.width} ] },
  { name: "OUT_STEP" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "OUT_CORRID" data_type: ${c.corrid} dims: [ 1 ] }
]
instance_group [ { kind: KIND_CPU count: ${c.instances} } ]`;
}
