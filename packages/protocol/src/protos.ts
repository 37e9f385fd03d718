import { fileURLToPath } from 'node:url';

/**
 * The one copy of Batchwise's .proto files (grpc_service.proto, health.proto, model_config.proto),
 * wire-compatible with Triton's; the same path from src/ and from dist/.
 */
export const PROTO_DIR = fileURLToPath(new URL('../proto/', import.meta.url));
