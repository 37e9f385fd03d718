/**
 * The floor of a gRPC inference server on Node (issue 44): a bare @grpc/grpc-js server whose ModelInfer
 * decodes the ModelInferRequest with @grpc/proto-loader (as grpc-js applications do) and answers a
 * ModelInferResponse carrying its first input back as the one output, in the server's reply shape.
 * Run as a child process; prints {"port": N} when listening.
 */
import { loadPackageDefinition, Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { DEFAULT_PROTO_DIR } from '@batchwise/client';

interface InferTensor {
  name: string;
  datatype: string;
  shape: string[];
}
interface InferRequest {
  model_name: string;
  model_version: string;
  id: string;
  inputs: InferTensor[];
  raw_input_contents: Buffer[];
}

const definition = loadSync('grpc_service.proto', {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [DEFAULT_PROTO_DIR],
});
const service = (loadPackageDefinition(definition) as unknown as { inference: { GRPCInferenceService: { service: never } } }).inference
  .GRPCInferenceService.service;

const server = new Server({ 'grpc.enable_channelz': 0 });
server.addService(service, {
  ModelInfer: (call: ServerUnaryCall<InferRequest, unknown>, callback: sendUnaryData<unknown>) => {
    const { model_name, id, inputs, raw_input_contents } = call.request;
    const input = inputs[0]!;
    callback(null, {
      model_name,
      model_version: '1',
      id,
      outputs: [{ name: 'OUTPUT0', datatype: input.datatype, shape: input.shape }],
      raw_output_contents: [raw_input_contents[0]!],
    });
  },
});
server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, port) => {
  if (error) throw error;
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
