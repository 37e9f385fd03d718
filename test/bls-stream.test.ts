/**
 * inferModelStream (Triton's BLS `exec(decoupled=True)`) on a real server: a JavaScript model reads
 * every response of a decoupled model as it is sent, or the one response of another model; the
 * values equal what the decoupled model streams to a gRPC client; leaving the loop early cancels the
 * called request (counted CANCELED there); an error response ends the call with it; and a loop that
 * reads slowly holds the called model back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, type InferRequest } from '@batchwise/client';
import { mlp, mulberry32, serializeModel } from '@batchwise/modelgen';
import { loadOrt } from '@batchwise/modelgen/test-support/ort.ts';
import { DECOUPLED_MODELS } from './support/decoupled-models.ts';
import { readMetric } from './support/metrics.ts';
import { serveModels, type ServedModels } from './support/server.ts';
import { waitFor } from './support/wait-for.ts';

/**
 * `reader`: calls `target` (parameter, default streamer) with its COUNT through inferModelStream and
 * answers NS, the N of each response it read. `take` stops after that many; `pause_ms` waits after
 * each of the first two responses, then asks the target how many responses it has sent (SENT).
 * A call error is answered as this request's error, with the call's code.
 */
const READER = `
import { inferModelStream, ModelError, tensor } from '@batchwise/backend';
const sentSoFar = async (model) => {
  for await (const log of inferModelStream({ model, inputs: [tensor('COUNT', 'INT32', [1, 1], [0])], parameters: { mode: 'log' } })) {
    return JSON.parse(Buffer.from(log.output('DATA').data).toString()).sent;
  }
};
export default {
  async execute(requests) {
    return Promise.all(requests.map(async (request) => {
      const p = request.parameters;
      const count = request.inputs.COUNT.data[0];
      const target = p.target ?? 'streamer';
      const inputs = target === 'echo' ? [tensor('X', 'INT32', [1, 1], [count])] : [tensor('COUNT', 'INT32', [1, 1], [count])];
      const parameters = { ...(p.mode && { mode: p.mode }), ...(p.bytes && { bytes: p.bytes }) };
      const ns = [];
      let sent = -1;
      const before = p.pause_ms ? await sentSoFar(target) : 0;
      if (p.crash) {
        // A call made without the request's signal, then the worker dies (an exception nobody catches).
        for await (const _ of inferModelStream({ model: target, inputs, parameters })) setTimeout(() => { throw new Error('the reader crashed'); });
      }
      try {
        for await (const response of inferModelStream({ model: target, inputs, parameters, signal: request.signal })) {
          ns.push(response.output(target === 'echo' ? 'Y' : 'N').data[0]);
          if (p.pause_ms && ns.length <= 2) await new Promise((resolve) => setTimeout(resolve, p.pause_ms));
          if (p.pause_ms && ns.length === 2) sent = (await sentSoFar(target)) - before;
          if (p.take !== undefined && ns.length >= p.take) break;
        }
      } catch (error) {
        return { error: new ModelError('call failed: ' + error.code + ': ' + error.message, error.code) };
      }
      return { outputs: [tensor('NS', 'INT32', [1, ns.length], ns), tensor('SENT', 'INT32', [1, 1], [sent])] };
    }));
  },
};
`;

const READER_CONFIG = `name: "reader"
backend: "js"
max_batch_size: 8
input [ { name: "COUNT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "NS" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "SENT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
`;

/**
 * `float_reader`: the two rows of X through inferModelStream to an ONNX model (`target`, batching or
 * not), answering Y, the OUTPUT0 of its one response, and RESPONSES, how many responses it read.
 */
const FLOAT_READER = `
import { inferModelStream, tensor } from '@batchwise/backend';
export default {
  async execute(requests) {
    return Promise.all(requests.map(async (request) => {
      const x = request.inputs.X;
      const results = [];
      for await (const r of inferModelStream({ model: request.parameters.target, inputs: [tensor('INPUT0', 'FP32', [2, 4], x.data)], signal: request.signal })) {
        results.push(r);
      }
      return { outputs: [tensor('Y', 'FP32', [2, 4], results[0].output('OUTPUT0').data), tensor('RESPONSES', 'INT32', [1], [results.length])] };
    }));
  },
};
`;
const MLP = mlp({ layers: 2, width: 4 });
const ONNX_MODELS = [
  {
    name: 'float_reader',
    config: `name: "float_reader"
backend: "js"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2, 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2, 4 ] }, { name: "RESPONSES" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
`,
    files: { '1/model.mjs': FLOAT_READER },
  },
  {
    name: 'mlp_batching',
    config: `name: "mlp_batching"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 2000 }
`,
    model: MLP,
  },
  {
    name: 'mlp_not_batching',
    config: `name: "mlp_not_batching"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2, 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2, 4 ] } ]
`,
    model: MLP,
  },
];

let served: ServedModels;
let grpc: GrpcClient;

beforeAll(async () => {
  served = await serveModels([
    ...DECOUPLED_MODELS,
    { name: 'reader', config: READER_CONFIG, files: { '1/model.mjs': READER } },
    ...ONNX_MODELS,
  ]);
  grpc = new GrpcClient({ url: `127.0.0.1:${served.server.grpcPort}` });
});
afterAll(async () => {
  await grpc?.close();
  await served?.close();
});

const read = (count: number, parameters: Record<string, string | number | boolean> = {}) =>
  served.client.infer({ model: 'reader', inputs: [{ name: 'COUNT', datatype: 'INT32', shape: [1, 1], data: [count] }], parameters });
const ns = async (count: number, parameters: Record<string, string | number | boolean> = {}) =>
  Array.from((await read(count, parameters)).outputs.find((o) => o.name === 'NS')!.data as Int32Array);

/** What the streamer sends a gRPC client for the same request: the source of truth. */
async function streamed(count: number): Promise<number[]> {
  const request: InferRequest = { model: 'streamer', inputs: [{ name: 'COUNT', datatype: 'INT32', shape: [1, 1], data: [count] }] };
  const out: number[] = [];
  for await (const result of grpc.streamResponses(request)) {
    out.push(Number((result.outputs.find((o) => o.name === 'N')!.data as Int32Array)[0]));
  }
  return out;
}

const metric = (name: string, model: string, labels = '') => readMetric(served.server.metricsPort, name, model, labels);

describe('inferModelStream', () => {
  it('reads every response of a decoupled model, as a gRPC client gets them (0, 1 and 20 responses)', async () => {
    for (const count of [0, 1, 20]) expect(await ns(count)).toEqual(await streamed(count));
  });

  for (const target of ['mlp_batching', 'mlp_not_batching']) {
    it(`${target}: the one response, as ONNX Runtime in-process answers the same inputs (8 calls at once)`, async () => {
      const ort = loadOrt();
      const session = await ort.InferenceSession.create(serializeModel(MLP), { logSeverityLevel: 3 });
      const next = mulberry32(target.length);
      const inputs = Array.from({ length: 8 }, () => Float32Array.from({ length: 8 }, () => next() * 4 - 2));
      const answers = await Promise.all(
        inputs.map((x) =>
          served.client.infer({
            model: 'float_reader',
            inputs: [{ name: 'X', datatype: 'FP32', shape: [2, 4], data: x }],
            parameters: { target },
          }),
        ),
      );
      for (let i = 0; i < inputs.length; i++) {
        const expected = (await session.run({ INPUT0: new ort.Tensor('float32', inputs[i], [2, 4]) }))['OUTPUT0']!.data as Float32Array;
        const output = (name: string) => answers[i]!.outputs.find((o) => o.name === name)!.data;
        expect(Array.from(output('Y') as Float32Array)).toEqual(Array.from(expected));
        expect(Array.from(output('RESPONSES') as Int32Array)).toEqual([1]);
      }
      await session.release();
    });
  }

  it('reads the one response of a model that is not decoupled', async () => {
    expect(await ns(7, { target: 'echo' })).toEqual([8]); // echo answers X + 1
  });

  it('leaving the loop early cancels the called request: counted CANCELED there, and the server serves on', async () => {
    const before = await metric('nv_inference_request_failure', 'streamer', 'reason="CANCELED"');
    // mode hang: one response, and never the final flag.
    expect(await ns(0, { mode: 'hang', take: 1 })).toEqual([0]);
    await waitFor(
      async () => (await metric('nv_inference_request_failure', 'streamer', 'reason="CANCELED"')) === before + 1,
      10_000,
      'the called request counted CANCELED',
    );
    expect(await ns(3)).toEqual([0, 1, 2]);
  });

  it('a worker that dies during a streamed call: the called request is cancelled (counted CANCELED), not left waiting', async () => {
    const before = await metric('nv_inference_request_failure', 'patient_streamer', 'reason="CANCELED"');
    await expect(read(0, { mode: 'hang', target: 'patient_streamer', crash: true })).rejects.toThrow(/reader/);
    await waitFor(
      async () => (await metric('nv_inference_request_failure', 'patient_streamer', 'reason="CANCELED"')) === before + 1,
      10_000,
      'the called request counted CANCELED',
    );
    expect(await ns(2)).toEqual([0, 1]);
  });

  it('an error response ends the call with it, after the responses before it', async () => {
    await expect(read(0, { mode: 'error_mid' })).rejects.toThrow(/call failed: INTERNAL: .*a failure in the middle/);
  });

  it('a call to a model that refuses the request fails with its refusal', async () => {
    await expect(read(1, { target: 'no_such_model' })).rejects.toThrow(/call failed: (NOT_FOUND|UNAVAILABLE|INVALID_ARG): .*no_such_model/);
  });

  it('a loop that reads slowly holds the decoupled model back: it sent a bounded number ahead, then all arrive', async () => {
    // patient_streamer: the streamer without its 400 ms final-response timeout.
    const result = await read(64, { pause_ms: 300, target: 'patient_streamer' });
    const all = Array.from(result.outputs.find((o) => o.name === 'NS')!.data as Int32Array);
    const sent = Number((result.outputs.find((o) => o.name === 'SENT')!.data as Int32Array)[0]);
    expect(all).toEqual(Array.from({ length: 64 }, (_, i) => i));
    // Two taken, then at most the call's window (8) and the streamer's own unsent window (8) ahead, give or take an acknowledgement.
    expect(sent).toBeGreaterThanOrEqual(2);
    expect(sent).toBeLessThan(2 + 8 + 8 + 8);
  });
});
