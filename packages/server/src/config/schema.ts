import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

/** packages/server/proto/model_config.proto, from src/config/ or from dist/config/. */
export const MODEL_CONFIG_PROTO_PATH = fileURLToPath(
  new URL('../../proto/model_config.proto', import.meta.url),
);

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
