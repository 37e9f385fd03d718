import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { InferenceServerError, type InferenceService } from '../core/index.ts';
import { unary } from './unary.ts';

type ServingStatus = 'SERVING' | 'NOT_SERVING';

const SERVER_NAMES = new Set(['', 'inference.GRPCInferenceService']);

/**
 * grpc.health.v1.Health/Check, what an ALB gRPC health check calls. The empty service name
 * (or the inference service's) is the server's readiness; any other name is a model's.
 */
export function healthHandlers(service: InferenceService, logger: Logger): UntypedServiceImplementation {
  return {
    Check: unary('Health/Check', logger, (r: { service: string }): { status: ServingStatus } => {
      if (SERVER_NAMES.has(r.service)) return { status: service.isReady() ? 'SERVING' : 'NOT_SERVING' };
      if (service.isModelReady(r.service)) return { status: 'SERVING' };
      if (service.repositoryIndex(false).some((e) => e.name === r.service)) return { status: 'NOT_SERVING' };
      throw new InferenceServerError('NOT_FOUND', `unknown service or model '${r.service}'`);
    }),
  };
}
