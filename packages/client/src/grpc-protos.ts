import { loadPackageDefinition, type GrpcObject, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { PROTO_DIR } from '@batchwise/protocol';

/** The one copy of Batchwise's .proto files, in @batchwise/protocol (a dependency the client declares). */
export const DEFAULT_PROTO_DIR = PROTO_DIR;

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
