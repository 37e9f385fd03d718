import type { FastifyInstance } from 'fastify';
import type { InferenceService } from '../../core/index.ts';

export function registerHealthRoutes(app: FastifyInstance, service: InferenceService): void {
  app.get('/v2/health/live', { config: { apiGroup: 'health' } }, async (_request, reply) =>
    reply.code(service.isLive() ? 200 : 400).send(),
  );
  app.get('/v2/health/ready', { config: { apiGroup: 'health' } }, async (_request, reply) =>
    reply.code(service.isReady() ? 200 : 400).send(),
  );
  app.get('/v2', { config: { apiGroup: 'metadata' } }, async () => service.serverMetadata());
}
