import type { FastifyInstance } from 'fastify';
import { Errors, type InferenceService } from '../../core/index.ts';
import { parseJsonObject } from '../infer-codec.ts';

/** Optional JSON body of a repository request, e.g. `{"ready": true}` or `{"parameters": {...}}`. */
function jsonBody(body: unknown): Record<string, unknown> {
  if (!Buffer.isBuffer(body) || body.length === 0) return {};
  return parseJsonObject(body);
}

export function registerRepositoryRoutes(app: FastifyInstance, service: InferenceService): void {
  app.post('/v2/repository/index', { config: { apiGroup: 'model-repository' } }, async (request) => {
    const ready = jsonBody(request.body)['ready'];
    return service.repositoryIndex(ready === true);
  });
  app.post<{ Params: { model: string } }>('/v2/repository/models/:model/load', { config: { apiGroup: 'model-repository' } }, async (request, reply) => {
    const parameters = (jsonBody(request.body)['parameters'] ?? {}) as Record<string, unknown>;
    const fileOverride = Object.keys(parameters).find((key) => key.startsWith('file:'));
    if (fileOverride !== undefined) throw Errors.fileOverrideUnsupported(fileOverride);
    const config = parameters['config'];
    if (config !== undefined && typeof config !== 'string') {
      throw Errors.invalidArg("load parameter 'config' must be a string holding the model configuration JSON");
    }
    await service.loadModel(request.params.model, config === undefined ? {} : { config });
    return reply.code(200).send();
  });
  app.post<{ Params: { model: string } }>('/v2/repository/models/:model/unload', { config: { apiGroup: 'model-repository' } }, async (request, reply) => {
    const parameters = (jsonBody(request.body)['parameters'] ?? {}) as Record<string, unknown>;
    await service.unloadModel(request.params.model, { unloadDependents: parameters['unload_dependents'] === true });
    return reply.code(200).send();
  });
}
