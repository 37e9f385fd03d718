import { join } from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_DIR } from '@batchwise/protocol';
import { frameMessage } from './transport/message-framing.ts';

/** The one home of Batchwise's .proto files, in @batchwise/protocol (shared with the client). */
export { PROTO_DIR };

/**
 * How messages decode into objects, as @grpc/proto-loader does with these options (what grpc-js
 * clients use, and what the handlers were written against): field names as written, enums by name,
 * defaults filled in, oneofs named by their case field; longs as String, so int64/uint64 values
 * (INT64 contents, statistics counters) survive beyond 2^53, and code that needs numbers converts
 * where the range is known to be safe.
 */
export const PROTO_LOADER_OPTIONS: protobuf.IConversionOptions & { readonly keepCase: true } = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

/** grpc_service.proto and health.proto as protobufjs types, loaded as proto-loader loads them (field names as written). */
export function loadGrpcServiceRoot(protoDir: string = PROTO_DIR): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(protoDir, target);
  root.loadSync(['grpc_service.proto', 'health.proto'], { keepCase: true });
  root.resolveAll();
  return root;
}

/** A method's request decoding and response encoding, on the objects proto-loader gives and takes. */
export interface MethodCodec {
  /** Request bytes -> object (`Type.toObject(Type.decode(bytes), PROTO_LOADER_OPTIONS)`). */
  decode(message: Uint8Array): unknown;
  /** Response object -> the framed message (`Type.encode(Type.fromObject(object))`, with its 5-byte prefix). */
  encode(response: unknown): Buffer;
}

/** Each method of a service (`inference.GRPCInferenceService`) by name: its path and its codec. */
export function serviceMethods(root: protobuf.Root, service: string): Map<string, { readonly path: string; readonly codec: MethodCodec }> {
  const methods = new Map<string, { path: string; codec: MethodCodec }>();
  for (const method of root.lookupService(service).methodsArray) {
    const requestType = method.resolvedRequestType!;
    const responseType = method.resolvedResponseType!;
    methods.set(method.name, {
      path: `/${service}/${method.name}`,
      codec: {
        decode: (message) => requestType.toObject(requestType.decode(message), PROTO_LOADER_OPTIONS),
        encode: (response) => frameMessage(responseType.encode(responseType.fromObject(response as Record<string, unknown>)).finish()),
      },
    });
  }
  return methods;
}
