/**
 * Ensembles with decoupled steps for test/decoupled-ensemble.test.ts. Triton's own from qa/L0_decoupled
 * (simple_repeat, sequence_repeat, fan_repeat, repeat_square, nested_square: their config.pbtxt text
 * as Triton has it, steps' models written from our docs: repeat_int32 and square_int32 as JavaScript
 * models, identity_int32 as an ONNX model, libtorch_nobatch_int32_int32_int32 as a JavaScript model),
 * the two pipelines Triton refuses (qa/L0_model_config invalid_decoupled_branching and _2), and
 * pipelines over the `streamer` test model (decoupled-models.ts) for errors, cancellation, a stalled
 * reader and batching.
 */
import { identity } from '@batchwise/modelgen';
import { DECOUPLED_MODELS, REPEAT_INT32_MODEL } from './decoupled-models.ts';
import type { RepositoryModel } from './repository.ts';

/** Triton's square backend: for IN = n, n responses of OUT = n, then the final flag alone. */
const SQUARE_INT32 = `
import { tensor } from '@batchwise/backend';
export default {
  execute(requests) {
    for (const request of requests) void square(request);
  },
};
async function square(request) {
  const sender = request.responseSender;
  const n = request.inputs.IN.data[0];
  for (let i = 0; i < n; i++) await sender.send({ outputs: [tensor('OUT', 'INT32', [1], [n])] });
  await sender.send(undefined, { final: true });
}
`;

/** The sum and the difference of two one-element tensors (Triton's qa libtorch_nobatch_int32_int32_int32, its dims set to [1]). */
const ADD_SUB = `
import { tensor } from '@batchwise/backend';
export default {
  execute(requests) {
    return requests.map((r) => {
      const [a, b] = [r.inputs.INPUT0.data[0], r.inputs.INPUT1.data[0]];
      return { outputs: [tensor('OUTPUT__0', 'INT32', [1], [a - b]), tensor('OUTPUT__1', 'INT32', [1], [a + b])] };
    });
  },
};
`;

const nobatch = (name: string, backend: string, inputs: string, outputs: string, extra = '') => `name: "${name}"
${backend}
max_batch_size: 0
${extra}
input [ ${inputs} ]
output [ ${outputs} ]
`;
const tensor = (name: string, type: string, dims: string) => `{ name: "${name}" data_type: ${type} dims: [ ${dims} ] }`;

const REPEAT_INPUTS = `${tensor('IN', 'TYPE_INT32', '-1')}, ${tensor('DELAY', 'TYPE_UINT32', '-1')}, ${tensor('WAIT', 'TYPE_UINT32', '1')}`;
const REPEAT_MAP = 'input_map { key: "IN" value: "IN" } input_map { key: "DELAY" value: "DELAY" } input_map { key: "WAIT" value: "WAIT" }';

/** An L0_decoupled ensemble: inputs IN, DELAY, WAIT, its steps and outputs. */
const l0 = (name: string, steps: string, outputs: string) => `name: "${name}"
max_batch_size: 0
platform: "ensemble"
ensemble_scheduling { step [ ${steps} ] }
input [ ${REPEAT_INPUTS} ]
output [ ${outputs} ]
`;
const OUT = tensor('OUT', 'TYPE_INT32', '1');
const IDX = tensor('IDX', 'TYPE_UINT32', '1');
const step = (model: string, maps: string) => `{ model_name: "${model}" model_version: -1 ${maps} }`;

export const L0_DECOUPLED_MODELS: readonly RepositoryModel[] = [
  REPEAT_INT32_MODEL,
  {
    name: 'square_int32',
    config: nobatch(
      'square_int32',
      'backend: "js"',
      tensor('IN', 'TYPE_INT32', '1'),
      tensor('OUT', 'TYPE_INT32', '1'),
      'model_transaction_policy { decoupled: true }',
    ),
    files: { '1/model.mjs': SQUARE_INT32 },
  },
  {
    name: 'identity_int32',
    config: nobatch(
      'identity_int32',
      'platform: "onnxruntime_onnx"',
      tensor('INPUT0', 'TYPE_INT32', '-1'),
      tensor('OUTPUT0', 'TYPE_INT32', '-1'),
    ),
    model: identity('INT32', [-1], { batch: false }),
  },
  {
    name: 'libtorch_nobatch_int32_int32_int32',
    config: nobatch(
      'libtorch_nobatch_int32_int32_int32',
      'backend: "js"',
      `${tensor('INPUT0', 'TYPE_INT32', '1')}, ${tensor('INPUT1', 'TYPE_INT32', '1')}`,
      `${tensor('OUTPUT__0', 'TYPE_INT32', '1')}, ${tensor('OUTPUT__1', 'TYPE_INT32', '1')}`,
    ),
    files: { '1/model.mjs': ADD_SUB },
  },
  {
    name: 'simple_repeat',
    config: l0(
      'simple_repeat',
      step('repeat_int32', `${REPEAT_MAP} output_map { key: "OUT" value: "OUT" } output_map { key: "IDX" value: "IDX" }`),
      `${OUT}, ${IDX}`,
    ),
  },
  {
    name: 'sequence_repeat',
    config: l0(
      'sequence_repeat',
      [
        step('repeat_int32', `${REPEAT_MAP} output_map { key: "OUT" value: "repeat_out" } output_map { key: "IDX" value: "IDX" }`),
        step('identity_int32', 'input_map { key: "INPUT0" value: "repeat_out" } output_map { key: "OUTPUT0" value: "OUT" }'),
      ].join(', '),
      `${OUT}, ${IDX}`,
    ),
  },
  {
    name: 'fan_repeat',
    config: l0(
      'fan_repeat',
      [
        step('repeat_int32', `${REPEAT_MAP} output_map { key: "OUT" value: "repeat_out" }`),
        step('identity_int32', 'input_map { key: "INPUT0" value: "repeat_out" } output_map { key: "OUTPUT0" value: "identity_out" }'),
        step(
          'libtorch_nobatch_int32_int32_int32',
          'input_map { key: "INPUT0" value: "repeat_out" } input_map { key: "INPUT1" value: "identity_out" } output_map { key: "OUTPUT__1" value: "OUT" }',
        ),
      ].join(', '),
      OUT,
    ),
  },
  {
    name: 'repeat_square',
    config: l0(
      'repeat_square',
      [
        step('repeat_int32', `${REPEAT_MAP} output_map { key: "OUT" value: "repeat_out" }`),
        step('square_int32', 'input_map { key: "IN" value: "repeat_out" } output_map { key: "OUT" value: "OUT" }'),
      ].join(', '),
      OUT,
    ),
  },
  {
    name: 'nested_square',
    config: l0(
      'nested_square',
      [
        step('simple_repeat', `${REPEAT_MAP} output_map { key: "OUT" value: "repeat_out" }`),
        step('square_int32', 'input_map { key: "IN" value: "repeat_out" } output_map { key: "OUT" value: "OUT" }'),
      ].join(', '),
      OUT,
    ),
  },
  // Triton refuses both: a step pairing two decoupled steps' responses, and outputs from two decoupled steps.
  {
    name: 'invalid_decoupled_branching',
    config: l0(
      'invalid_decoupled_branching',
      [
        step('repeat_int32', `${REPEAT_MAP} output_map { key: "OUT" value: "repeat_1_out" }`),
        step('repeat_int32', `${REPEAT_MAP} output_map { key: "OUT" value: "repeat_2_out" }`),
        step(
          'libtorch_nobatch_int32_int32_int32',
          'input_map { key: "INPUT0" value: "repeat_1_out" } input_map { key: "INPUT1" value: "repeat_2_out" } output_map { key: "OUTPUT__1" value: "OUT" }',
        ),
      ].join(', '),
      OUT,
    ),
  },
  {
    name: 'invalid_decoupled_branching_2',
    config: l0(
      'invalid_decoupled_branching_2',
      [
        step('repeat_int32', `${REPEAT_MAP} output_map { key: "OUT" value: "OUT" }`),
        step('repeat_int32', `${REPEAT_MAP} output_map { key: "IDX" value: "IDX" }`),
      ].join(', '),
      `${OUT}, ${IDX}`,
    ),
  },
];

/**
 * `relay` (batching up to 8) and `relay_one` (one request an execution, two instances): N and DATA on,
 * one response per request (a `fail_at` parameter equal to N fails that request; `delay_ms` waits before
 * answering, `descending_ms` waits that many ms times 10 - N, so that later responses finish first).
 * `slow_int32`: an ONNX identity whose lone request waits 10 s for company, so what reaches it stays
 * queued until cancelled.
 */
const RELAY = `
import { ModelError, tensor } from '@batchwise/backend';
export default {
  async execute(requests) {
    const { delay_ms: delay, descending_ms: descending } = requests[0].parameters;
    if (delay) await new Promise((resolve) => setTimeout(resolve, delay));
    if (descending) await new Promise((resolve) => setTimeout(resolve, descending * Math.max(0, 10 - requests[0].inputs.N.data[0])));
    return requests.map((r) => {
      const n = r.inputs.N.data[0];
      if (r.parameters.fail_at === n) return { error: new ModelError('relay refuses N = ' + n) };
      return { outputs: [tensor('N_OUT', 'INT32', [1, 1], [n]), tensor('DATA_OUT', 'UINT8', r.inputs.DATA.shape, r.inputs.DATA.data)] };
    });
  },
};
`;

const relayConfig = (name: string, maxBatchSize: number, extra: string) => `name: "${name}"
backend: "js"
max_batch_size: ${maxBatchSize}
input [ ${tensor('N', 'TYPE_INT32', '1')}, ${tensor('DATA', 'TYPE_UINT8', '-1')} ]
output [ ${tensor('N_OUT', 'TYPE_INT32', '1')}, ${tensor('DATA_OUT', 'TYPE_UINT8', '-1')} ]
${extra}
`;

const pipeline = (name: string, source: string, relay = 'relay', maxBatchSize = 8) => `name: "${name}"
platform: "ensemble"
max_batch_size: ${maxBatchSize}
input [ ${tensor('COUNT', 'TYPE_INT32', '1')} ]
output [ ${tensor('N', 'TYPE_INT32', '1')}, ${tensor('DATA', 'TYPE_UINT8', '-1')} ]
ensemble_scheduling { step [
  { model_name: "${source}" model_version: -1 input_map { key: "COUNT" value: "COUNT" } output_map { key: "N" value: "n" } output_map { key: "DATA" value: "data" } },
  { model_name: "${relay}" model_version: -1 input_map { key: "N" value: "n" } input_map { key: "DATA" value: "data" }
    output_map { key: "N_OUT" value: "N" } output_map { key: "DATA_OUT" value: "DATA" } }
] }
`;

export const PIPELINE_MODELS: readonly RepositoryModel[] = [
  ...DECOUPLED_MODELS.filter((m) => ['streamer', 'patient_streamer'].includes(m.name)),
  {
    name: 'relay',
    config: relayConfig('relay', 8, 'dynamic_batching { max_queue_delay_microseconds: 2000 }'),
    files: { '1/model.mjs': RELAY },
  },
  // One request per execution on two instances: a later request may finish first.
  {
    name: 'relay_one',
    config: relayConfig('relay_one', 1, 'instance_group [ { count: 2 kind: KIND_CPU } ]'),
    files: { '1/model.mjs': RELAY },
  },
  {
    name: 'slow_int32',
    config: `name: "slow_int32"
max_batch_size: 8
input [ ${tensor('INPUT0', 'TYPE_INT32', '1')} ]
output [ ${tensor('OUTPUT0', 'TYPE_INT32', '1')} ]
dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 10000000 }
parameters { key: "batchwise_adaptive_queue_delay" value: { string_value: "false" } }
`,
    model: identity('INT32', [1]),
  },
  /** streamer -> relay: N and DATA of each response. */
  { name: 'pipeline', config: pipeline('pipeline', 'streamer') },
  /** streamer -> relay_one, whose two instances may finish a later response first. */
  { name: 'ordered_pipeline', config: pipeline('ordered_pipeline', 'streamer', 'relay_one', 1) },
  /** The same with the patient streamer (the default final-response timeout), for the stalled reader. */
  { name: 'patient_pipeline', config: pipeline('patient_pipeline', 'patient_streamer') },
  /** patient_streamer -> slow_int32: each response of the streamer waits in slow_int32's queue. */
  {
    name: 'queued_pipeline',
    config: `name: "queued_pipeline"
platform: "ensemble"
max_batch_size: 8
input [ ${tensor('COUNT', 'TYPE_INT32', '1')} ]
output [ ${tensor('N', 'TYPE_INT32', '1')} ]
ensemble_scheduling { step [
  { model_name: "patient_streamer" model_version: -1 input_map { key: "COUNT" value: "COUNT" } output_map { key: "N" value: "n" } },
  { model_name: "slow_int32" model_version: -1 input_map { key: "INPUT0" value: "n" } output_map { key: "OUTPUT0" value: "N" } }
] }
`,
  },
];
