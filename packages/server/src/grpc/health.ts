import type { Logger } from 'pino';
import { Errors, InferenceServerError, type InferenceService } from '../core/index.ts';
import type { MethodCodec } from './protos.ts';
import type { MethodHandler } from './transport/server-call.ts';
import { unary } from './unary.ts';

const SERVER_NAMES = new Set(['', 'inference.GRPCInferenceService']);

/**
 * grpc.health.v1.Health/Check, what an ALB gRPC health check calls. The empty service name
 * (or the inference service's) is the server's readiness; any other name is a model's.
 *
 * SERVING is answered with status OK. NOT_SERVING is answered with status UNAVAILABLE and a
 * message that starts with NOT_SERVING and says why, for every caller: an ALB gRPC health
 * check looks only at the status code (matcher 0), so an OK carrying NOT_SERVING kept
 * sending traffic to tasks still downloading models. The ALB's checker cannot be told apart
 * reliably (AWS documents no user-agent for it), and the other standard callers count an
 * error as unhealthy just as they count NOT_SERVING: grpc_health_probe exits non-zero on
 * anything but SERVING, Kubernetes gRPC probes fail on any RPC error, Envoy marks non-OK
 * unhealthy. Triton answers OK with NOT_SERVING (docs/triton-compatibility.md, "gRPC").
 */
export function healthHandlers(
  service: InferenceService,
  logger: Logger,
  codecOf: (method: string) => MethodCodec,
): Record<string, MethodHandler> {
  return {
    Check: unary('Health/Check', codecOf('Check'), logger, (r: { service: string }): { status: 'SERVING' } => {
      if (SERVER_NAMES.has(r.service)) {
        if (service.isReady()) return { status: 'SERVING' };
        throw notServing(`the server is not ready${notReadyModels(service)}`);
      }
      if (service.isModelReady(r.service)) return { status: 'SERVING' };
      const entry = service.repositoryIndex(false).find((e) => e.name === r.service);
      if (entry) throw notServing(`model '${r.service}' is ${entry.state ?? 'not ready'}${entry.reason ? `: ${entry.reason}` : ''}`);
      throw new InferenceServerError('NOT_FOUND', `unknown service or model '${r.service}'`);
    }),
  };
}

function notServing(why: string): InferenceServerError {
  return Errors.unavailable(`NOT_SERVING: ${why}`);
}

/** Names the models that hold readiness back, or says the server is starting or stopping. */
function notReadyModels(service: InferenceService): string {
  const waiting = service.repositoryIndex(false).filter((e) => e.state !== 'READY');
  if (waiting.length === 0) return ' (starting up or shutting down)';
  return ` (${waiting.map((e) => `${e.name}${e.version ? ` v${e.version}` : ''} ${e.state ?? 'not loaded'}`).join(', ')})`;
}
