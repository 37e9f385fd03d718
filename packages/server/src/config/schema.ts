import { join } from 'node:path';
import { PROTO_DIR } from '@batchwise/protocol';
import protobuf from 'protobufjs';

/** model_config.proto, among the protos of @batchwise/protocol. */
export const MODEL_CONFIG_PROTO_PATH = join(PROTO_DIR, 'model_config.proto');

let root: protobuf.Root | undefined;

/** The loaded model_config.proto (package `inference`, field names as written). */
export function modelConfigRoot(): protobuf.Root {
  if (!root) {
    root = new protobuf.Root().loadSync(MODEL_CONFIG_PROTO_PATH, { keepCase: true });
    root.resolveAll();
  }
  return root;
}

export function modelConfigType(): protobuf.Type {
  return modelConfigRoot().lookupType('inference.ModelConfig');
}

/** `inference.ModelInput` rather than protobufjs's `.inference.ModelInput`. */
export function typeName(type: protobuf.ReflectionObject): string {
  return type.fullName.replace(/^\./, '');
}
