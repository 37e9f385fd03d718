import type protobuf from 'protobufjs';
import { decodeInferMessage } from '../src/grpc/infer-message.ts';
import { loadGrpcServiceRoot } from '../src/grpc/protos.ts';
import type { WireContents } from '../src/grpc/wire-contents.ts';
import type { InferTensorContentsWire } from '../src/grpc/wire-types.ts';

/** Test support: ModelInferRequest messages as clients encode them, from the object form. */

let requestType: protobuf.Type | undefined;

export function encodeInferRequest(request: Record<string, unknown>): Buffer {
  if (!requestType) {
    const root = loadGrpcServiceRoot();
    root.resolveAll();
    requestType = root.lookupType('inference.ModelInferRequest');
  }
  return Buffer.from(requestType.encode(requestType.fromObject(request)).finish());
}

/** `contents` as they lie on the wire of a request that carries them (none: empty). */
export function wireContents(contents: InferTensorContentsWire): WireContents {
  const message = encodeInferRequest({ inputs: [{ name: 'IN', contents }] });
  return (
    decodeInferMessage(message).request.inputs[0]!.contents ?? {
      message,
      ranges: [],
      counts: [0, 0, 0, 0, 0, 0, 0, 0, 0],
      bytesContentBytes: 0,
    }
  );
}
