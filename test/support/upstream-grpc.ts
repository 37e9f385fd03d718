/**
 * A grpc-js client built from Triton's own .proto files (<repo root>/../shared/reference/
 * triton-protocol), as an existing Triton client would talk to the server.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type { Client, ServiceClientConstructor } from '@grpc/grpc-js';

export const UPSTREAM_DIR = fileURLToPath(new URL('../../../shared/reference/triton-protocol/', import.meta.url));
export const upstreamPresent = existsSync(join(UPSTREAM_DIR, 'grpc_service.proto'));

// test/package.json does not list grpc-js: borrow the client package's copy.
const fromClient = createRequire(new URL('../../packages/client/package.json', import.meta.url));
const grpc = fromClient('@grpc/grpc-js') as typeof import('@grpc/grpc-js');
const { loadSync } = fromClient('@grpc/proto-loader') as typeof import('@grpc/proto-loader');
export const { status } = grpc;

export type AnyClient = Client & Record<string, Function>;

export function upstreamClients(address: string): { inference: AnyClient; health: AnyClient } {
  const definition = loadSync(['grpc_service.proto', 'health.proto'], {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [UPSTREAM_DIR],
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
