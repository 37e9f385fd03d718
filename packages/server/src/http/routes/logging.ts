import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { currentLogSettings, updateLogSettings } from '../../logging/log-settings.ts';
import { parseJsonObject } from '../infer-codec.ts';

const options = { config: { apiGroup: 'logging' as const } };

/** Triton's logging extension: read the log settings, or change any of them. */
export function registerLoggingRoutes(app: FastifyInstance, logger: Logger): void {
  app.get('/v2/logging', options, async () => currentLogSettings(logger));
  app.post('/v2/logging', options, async (request) => {
    const body = Buffer.isBuffer(request.body) && request.body.length > 0 ? parseJsonObject(request.body) : {};
    return updateLogSettings(logger, body);
  });
}
