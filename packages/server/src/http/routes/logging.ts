import type { FastifyInstance } from 'fastify';
import type { InferenceService } from '../../core/index.ts';
import { parseJsonObject } from '../infer-codec.ts';

const options = { config: { apiGroup: 'logging' as const } };

/** Triton's logging extension: read the log settings, or change any of them. */
export function registerLoggingRoutes(app: FastifyInstance, service: InferenceService): void {
  app.get('/v2/logging', options, async () => service.logSettings());
  app.post('/v2/logging', options, async (request) => {
    const body = Buffer.isBuffer(request.body) && request.body.length > 0 ? parseJsonObject(request.body) : {};
    return service.updateLogSettings(body);
  });
}
