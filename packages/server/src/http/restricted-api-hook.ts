import type { FastifyInstance } from 'fastify';
import { isAllowed, type ApiGroup, type RestrictionTable } from '../access/restricted-api.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The Triton API group a route belongs to, for --http-restricted-api. */
    apiGroup?: ApiGroup;
  }
}

/** Refuses calls to restricted groups without the right header, with Triton's status and message. */
export function registerRestrictedApiHook(app: FastifyInstance, table: RestrictionTable): void {
  if (table.size === 0) return;
  app.addHook('onRequest', async (request, reply) => {
    const group = request.routeOptions.config.apiGroup;
    if (group === undefined) return;
    const restriction = table.get(group);
    if (!restriction) return;
    const presented = request.headers[restriction.header];
    if (!isAllowed(table, group, Array.isArray(presented) ? presented[0] : presented)) {
      return reply.code(403).send({ error: `This API is restricted, expecting header '${restriction.header}'` });
    }
  });
}
