/**
 * A grpc-js client built from Triton's own .proto files (TRITON_PROTOCOL_DIR: <repo root>/../shared/
 * reference/triton-protocol), as an existing Triton client would talk to the server. Tests that use
 * it are declared with describeWithTritonProtocol: skipped where the files are missing, failed in CI.
 */
import { createRequire } from 'node:module';
import type { Client, ServiceClientConstructor } from '@grpc/grpc-js';
import {
  TRITON_PROTOCOL_DIR,
  tritonProtocolMissingMessage,
  tritonProtocolPresent,
} from '@batchwise/server/test-support/triton-protocol.ts';

export { describeWithTritonProtocol } from '@batchwise/server/test-support/triton-protocol.ts';

// test/package.json does not list grpc-js: borrow the client package's copy.
const fromClient = createRequire(new URL('../../packages/client/package.json', import.meta.url));
const grpc = fromClient('@grpc/grpc-js') as typeof import('@grpc/grpc-js');
const { loadSync } = fromClient('@grpc/proto-loader') as typeof import('@grpc/proto-loader');
export const { status } = grpc;

export type AnyClient = Client & Record<string, Function>;

/**
 * Clients from Triton's protos, or from the .proto files in `protoDir` (our own, wire-identical ones,
 * for tests about answers rather than about the protos).
 */
export function upstreamClients(address: string, protoDir?: string): { inference: AnyClient; health: AnyClient } {
  if (protoDir === undefined && !tritonProtocolPresent) throw new Error(tritonProtocolMissingMessage());
  const definition = loadSync(['grpc_service.proto', 'health.proto'], {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [protoDir ?? TRITON_PROTOCOL_DIR],
  });
  const root = grpc.loadPackageDefinition(definition) as any;
  const Inference = root.inference.GRPCInferenceService as ServiceClientConstructor;
  const Health = root.grpc.health.v1.Health as ServiceClientConstructor;
  const options = { 'grpc.max_receive_message_length': 64 << 20 };
  return {
    inference: new Inference(address, grpc.credentials.createInsecure(), options) as AnyClient,
    health: new Health(address, grpc.credentials.createInsecure(), options) as AnyClient,
  };
}

/** A unary call as a promise. */
export function unaryCall(client: AnyClient, method: string, request: unknown): Promise<any> {
  return new Promise((resolve, reject) =>
    client[method]!.call(client, request, (error: unknown, response: unknown) => (error ? reject(error) : resolve(response))),
  );
}
