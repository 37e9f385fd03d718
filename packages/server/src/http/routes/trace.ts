import type { FastifyInstance } from 'fastify';
import { parseTraceSettingsUpdate, traceSettingsToWire, type InferenceService } from '../../core/index.ts';
import { parseJsonObject } from '../infer-codec.ts';

const options = { config: { apiGroup: 'trace' as const } };

/** Triton's trace extension: global settings, and each model's own. */
export function registerTraceRoutes(app: FastifyInstance, service: InferenceService): void {
  const read = (model?: string) => traceSettingsToWire(service.traceSettings(model));
  const update = (body: unknown, model?: string) => {
    const json = Buffer.isBuffer(body) && body.length > 0 ? parseJsonObject(body) : {};
    return traceSettingsToWire(service.updateTraceSettings(parseTraceSettingsUpdate(json), model));
  };
  app.get('/v2/trace/setting', options, async () => read());
  app.post('/v2/trace/setting', options, async (request) => update(request.body));
  app.get<{ Params: { model: string } }>('/v2/models/:model/trace/setting', options, async (request) => read(request.params.model));
  app.post<{ Params: { model: string } }>('/v2/models/:model/trace/setting', options, async (request) =>
    update(request.body, request.params.model),
  );
}
