import { join } from 'node:path';
import protobuf from 'protobufjs';
import { loadPackageDefinition, type GrpcObject, type ServiceDefinition } from '@grpc/grpc-js';
import { loadSync, type Options } from '@grpc/proto-loader';
import { PROTO_DIR } from '@batchwise/protocol';

/** The one home of Batchwise's .proto files, in @batchwise/protocol (shared with the client). */
export { PROTO_DIR };

/**
 * longs as String: int64/uint64 values (INT64 contents, statistics counters) survive beyond
 * 2^53; code that needs numbers converts where the range is known to be safe.
 */
export const PROTO_LOADER_OPTIONS: Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

/** grpc_service.proto as protobufjs types, loaded as proto-loader loads it (field names as written). */
export function loadGrpcServiceRoot(protoDir: string = PROTO_DIR): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(protoDir, target);
  root.loadSync('grpc_service.proto', { keepCase: true });
  return root;
}

export interface ServiceDefinitions {
  readonly inference: ServiceDefinition;
  readonly health: ServiceDefinition;
}

export function loadServiceDefinitions(protoDir: string = PROTO_DIR): ServiceDefinitions {
  const definition = loadSync(['grpc_service.proto', 'health.proto'], {
    ...PROTO_LOADER_OPTIONS,
    includeDirs: [protoDir],
  });
  const root = loadPackageDefinition(definition);
  return {
    inference: serviceOf(root, ['inference', 'GRPCInferenceService']),
    health: serviceOf(root, ['grpc', 'health', 'v1', 'Health']),
  };
}

/**
 * The inference service with ModelInfer and ModelStreamInfer requests handed to their handlers
 * as the message's bytes: decodeInferMessage (infer-message.ts) decodes them there, counting
 * tensor elements on the wire before any is decoded.
 */
export function withRawInferRequests(service: ServiceDefinition): ServiceDefinition {
  const raw = (method: string) => ({ ...service[method]!, requestDeserialize: (bytes: Buffer) => bytes });
  return { ...service, ModelInfer: raw('ModelInfer'), ModelStreamInfer: raw('ModelStreamInfer') };
}

function serviceOf(root: GrpcObject, path: string[]): ServiceDefinition {
  let node: unknown = root;
  for (const part of path) node = (node as Record<string, unknown>)[part];
  return (node as { service: ServiceDefinition }).service;
}
