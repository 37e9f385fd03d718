import type { FastifyInstance } from 'fastify';
import { modelConfigToJson, type InferenceService } from '../../core/index.ts';

interface ModelParams {
  model: string;
  version?: string;
}

const MODEL = '/v2/models/:model';
const VERSION = '/v2/models/:model/versions/:version';

export function registerModelRoutes(app: FastifyInstance, service: InferenceService): void {
  for (const prefix of [MODEL, VERSION]) {
    // With --load-on-demand, metadata and config load a model not loaded yet, as a Triton client asks for them before inferring.
    app.get<{ Params: ModelParams }>(prefix, { config: { apiGroup: 'metadata' } }, async (request) => {
      await service.awaitLoad(request.params.model);
      return service.modelMetadata(request.params.model, request.params.version);
    });
    app.get<{ Params: ModelParams }>(`${prefix}/ready`, { config: { apiGroup: 'health' } }, async (request, reply) =>
      reply.code(service.isModelReady(request.params.model, request.params.version) ? 200 : 400).send(),
    );
    app.get<{ Params: ModelParams }>(`${prefix}/config`, { config: { apiGroup: 'model-config' } }, async (request) => {
      await service.awaitLoad(request.params.model);
      return modelConfigToJson(service.modelConfig(request.params.model, request.params.version));
    });
    app.get<{ Params: ModelParams }>(`${prefix}/stats`, { config: { apiGroup: 'statistics' } }, async (request) => ({
      model_stats: service.statistics(request.params.model, request.params.version),
    }));
  }
  app.get('/v2/models/stats', { config: { apiGroup: 'statistics' } }, async () => ({ model_stats: service.statistics() }));
}
