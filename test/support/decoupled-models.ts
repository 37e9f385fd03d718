/**
 * Decoupled JavaScript models for the streaming tests (test/decoupled*.test.ts), written into a
 * temporary repository: `repeat_int32`, the example repository's port of Triton's own decoupled test model
 * (qa/L0_decoupled: one response per element of IN, after DELAY[i] ms, then the final flag alone), and `streamer`,
 * which streams, fails, stalls and waits for its cancellation as each request's `mode` parameter says.
 */
import { readFileSync } from 'node:fs';
import { identity } from '@batchwise/modelgen';
import type { RepositoryModel } from './repository.ts';

/** Triton's repeat_int32 as the example repository has it. */
const REPEAT_INT32_DIR = new URL('../../examples/model_repository/repeat_int32/', import.meta.url);
const REPEAT_INT32 = readFileSync(new URL('1/model.mjs', REPEAT_INT32_DIR), 'utf8');
const REPEAT_INT32_CONFIG = readFileSync(new URL('config.pbtxt', REPEAT_INT32_DIR), 'utf8');

/**
 * Modes (request parameter `mode`): `count` (COUNT responses N = 0.., each with `bytes` bytes of
 * DATA, the final flag with the last, or alone with `flag_final`), `error_mid` (a response, an error
 * response, a response, final), `error_final` (an error response, final), `hang` (a response, and
 * never the final flag), `wait_abort` (a response, then waits for its signal; with `call` it first
 * calls the model `slow` with its signal, or with `own_signal` with a signal of its own aborted with
 * it), `after_final` (the final response, then one more send), `batch` (one response: how many
 * requests its execute() had), `log` (one response: what the model noted, then the notes are cleared). Notes: sends refused, signals aborted, calls cancelled, sends done.
 * With `hold_ms`, execute() returns that long after it started its requests.
 */
const STREAMER = `
import { inferModel, tensor } from '@batchwise/backend';
const notes = [];
let sent = 0;
const out = (request, n, bytes = 0) => ({
  outputs: [tensor('N', 'INT32', [1, 1], [n]), tensor('DATA', 'UINT8', [1, bytes], new Uint8Array(bytes).fill(n % 256))],
});
const note = (text) => notes.push(text);
export default {
  execute(requests) {
    for (const request of requests) void run(request, requests.length).catch((e) => note('run failed: ' + e.message));
    // hold_ms: execute() returns that long after its requests started (their responses do not wait for it).
    const hold = Math.max(0, ...requests.map((r) => r.parameters.hold_ms ?? 0));
    if (hold > 0) return new Promise((resolve) => setTimeout(resolve, hold));
  },
};
async function run(request, batch) {
  const sender = request.responseSender;
  const p = request.parameters;
  const count = request.inputs.COUNT.data[0];
  switch (p.mode ?? 'count') {
    case 'count':
      for (let i = 0; i < count; i++) {
        const last = i === count - 1 && !p.flag_final;
        await sender.send(out(request, i, p.bytes ?? 0), { final: last });
        sent++;
      }
      if (p.flag_final || count === 0) await sender.send(undefined, { final: true });
      return;
    case 'error_mid':
      await sender.send(out(request, 0));
      await sender.send({ error: new Error('a failure in the middle') });
      await sender.send(out(request, 1), { final: true });
      return;
    case 'error_final':
      await sender.send(new Error('a failure at the end'), { final: true });
      return;
    case 'hang':
      await sender.send(out(request, 0));
      return;
    case 'wait_abort': {
      await sender.send(out(request, 0));
      const aborted = new Promise((resolve) => request.signal.addEventListener('abort', resolve, { once: true }));
      if (p.call) {
        const input = tensor('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4]);
        // own_signal: a signal of the model's own, aborted with the request's (the worker tells the server itself).
        const own = new AbortController();
        if (p.own_signal) request.signal.addEventListener('abort', () => own.abort(), { once: true });
        await inferModel({ model: 'slow', inputs: [input], signal: p.own_signal ? own.signal : request.signal }).then(
          () => note('call answered'),
          (e) => note('call ' + e.code + ': ' + e.message),
        );
      }
      await aborted;
      note('aborted: ' + request.signal.reason.message + ' cancelled=' + sender.isCancelled());
      await sender.send(out(request, 1)).catch((e) => note('send refused: ' + e.name + ' ' + e.code + ': ' + e.message));
      return;
    }
    case 'after_final':
      await sender.send(out(request, 0), { final: true });
      await sender.send(out(request, 1)).catch((e) => note('send refused: ' + e.message));
      return;
    case 'batch':
      await sender.send(out(request, batch), { final: true });
      return;
    case 'log': {
      const text = JSON.stringify({ notes: notes.splice(0), sent });
      await sender.send({ outputs: [tensor('N', 'INT32', [1, 1], [0]), tensor('DATA', 'UINT8', [1, text.length], Buffer.from(text))] }, { final: true });
      return;
    }
  }
}
`;

const STREAMER_CONFIG = `name: "streamer"
backend: "js"
max_batch_size: 8
model_transaction_policy { decoupled: true }
input [ { name: "COUNT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "DATA" data_type: TYPE_UINT8 dims: [ -1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters { key: "batchwise_adaptive_queue_delay" value: { string_value: "false" } }
parameters { key: "batchwise_final_response_timeout_ms" value: { string_value: "400" } }
`;

/** Not decoupled: Y = X + 1, and a `wait_abort` mode that calls the model `slow` with its signal and answers once it aborted. */
const ECHO = `
import { inferModel, tensor } from '@batchwise/backend';
export default {
  async execute(requests) {
    return Promise.all(requests.map(async (r) => {
      if (r.parameters.mode === 'wait_abort') {
        await inferModel({ model: 'slow', inputs: [tensor('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])], signal: r.signal }).catch(() => {});
        if (!r.signal.aborted) await new Promise((resolve) => r.signal.addEventListener('abort', resolve, { once: true }));
      }
      return { outputs: [tensor('Y', 'INT32', r.inputs.X.shape, r.inputs.X.data.map((v) => v + 1))] };
    }));
  },
};
`;

const ECHO_CONFIG = `name: "echo"
backend: "js"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ -1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
`;

/** An ONNX model whose lone request waits 10 s for company: what is queued there stays queued until cancelled. */
const SLOW_CONFIG = `name: "slow"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 10000000 }
parameters { key: "batchwise_adaptive_queue_delay" value: { string_value: "false" } }
`;

export const REPEAT_INT32_MODEL: RepositoryModel = {
  name: 'repeat_int32',
  config: REPEAT_INT32_CONFIG,
  files: { '1/model.mjs': REPEAT_INT32 },
};

export const DECOUPLED_MODELS: readonly RepositoryModel[] = [
  REPEAT_INT32_MODEL,
  { name: 'streamer', config: STREAMER_CONFIG, files: { '1/model.mjs': STREAMER } },
  // The same model, its requests allowed the default final-response timeout (5 minutes).
  {
    name: 'patient_streamer',
    config: STREAMER_CONFIG.replace('"streamer"', '"patient_streamer"').replace(/parameters .*final_response_timeout.*\n/, ''),
    files: { '1/model.mjs': STREAMER },
  },
  { name: 'echo', config: ECHO_CONFIG, files: { '1/model.mjs': ECHO } },
  { name: 'slow', config: SLOW_CONFIG, model: identity('FP32', [4]) },
];

/** Models whose load is refused: a decoupled ONNX model, and a decoupled model with the response cache. */
export const REFUSED_MODELS: readonly RepositoryModel[] = [
  {
    name: 'cached_streamer',
    config: `${STREAMER_CONFIG.replace('"streamer"', '"cached_streamer"')}response_cache { enable: true }\n`,
    files: { '1/model.mjs': STREAMER },
  },
  {
    name: 'decoupled_onnx',
    config: `name: "decoupled_onnx"
max_batch_size: 8
model_transaction_policy { decoupled: true }
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
`,
    model: identity('FP32', [4]),
  },
];
