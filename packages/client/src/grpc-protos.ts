import { fileURLToPath } from 'node:url';
import { loadPackageDefinition, type GrpcObject, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';

/**
 * The server package's proto folder, the one copy of Batchwise's .proto files in this
 * monorepo. A published build of the client ships a copy and passes its own `protoDir`.
 */
export const DEFAULT_PROTO_DIR = fileURLToPath(new URL('../../server/proto/', import.meta.url));

export interface GrpcConstructors {
  readonly inference: ServiceClientConstructor;
  readonly health: ServiceClientConstructor;
}

/** longs as Number: shapes, counters and parameters fit; tensors travel as raw bytes. */
export function loadClientConstructors(protoDir: string = DEFAULT_PROTO_DIR): GrpcConstructors {
  const definition = loadSync(['grpc_service.proto', 'health.proto'], {
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [protoDir],
  });
  const root = loadPackageDefinition(definition) as GrpcObject & {
    inference: { GRPCInferenceService: ServiceClientConstructor };
    grpc: { health: { v1: { Health: ServiceClientConstructor } } };
  };
  return { inference: root.inference.GRPCInferenceService, health: root.grpc.health.v1.Health };
}
