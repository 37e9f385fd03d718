/**
 * What a Node shop writes instead of an inference server (issue 34's naive peer): fastify and
 * onnxruntime-node, one InferenceSession on the model file given (argv[2]) created at start with
 * ONNX Runtime's defaults, `session.run` called in the route handler on each request's FP32 input,
 * no batching, no worker thread. Same request and reply shape as the echo (bench/src/peer-server.ts).
 * Run as a child process; prints {"port": N} when listening.
 */
import ort from 'onnxruntime-node';
import { servePeer } from './peer-server.ts';

const session = await ort.InferenceSession.create(process.argv[2]!);
const inputName = session.inputNames[0]!;
const outputName = session.outputNames[0]!;

await servePeer(async (input) => {
  if (input.datatype !== 'FP32') throw new Error(`FP32 only, not ${input.datatype}`);
  const { buffer, byteOffset, byteLength } = input.bytes;
  // A copy: the body's bytes need not be 4-byte aligned.
  const data = new Float32Array(buffer.slice(byteOffset, byteOffset + byteLength));
  const results = await session.run({ [inputName]: new ort.Tensor('float32', data, input.shape) });
  const output = results[outputName]!.data as Float32Array;
  return {
    name: outputName,
    datatype: 'FP32',
    shape: results[outputName]!.dims,
    bytes: new Uint8Array(output.buffer, output.byteOffset, output.byteLength),
  };
});
