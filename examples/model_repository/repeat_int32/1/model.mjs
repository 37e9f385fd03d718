// Triton's decoupled example `repeat_int32` (its repeat backend, qa/L0_decoupled) in JavaScript: for each element
// of IN, after DELAY[i] ms, a response with OUT = IN[i] and IDX = i (the outputs the request asked for); then,
// after WAIT ms, the final flag alone.
import { tensor } from '@batchwise/backend';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export default {
  execute(requests) {
    for (const request of requests) void repeat(request);
  },
};

async function repeat(request) {
  const sender = request.responseSender;
  const values = request.inputs.IN.data;
  const delays = request.inputs.DELAY.data;
  for (let i = 0; i < values.length; i++) {
    await sleep(delays[i] ?? 0);
    const outputs = [tensor('OUT', 'INT32', [1], [values[i]]), tensor('IDX', 'UINT32', [1], [i])];
    await sender.send({ outputs: outputs.filter((t) => request.requestedOutputs.includes(t.name)) });
  }
  await sleep(request.inputs.WAIT?.data[0] ?? 0);
  await sender.send(undefined, { final: true });
}
