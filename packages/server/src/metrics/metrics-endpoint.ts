import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

/** Prometheus text exposition at GET /metrics, on its own port (Triton's :8002). */
export function createMetricsEndpoint(registry: Registry): Server {
  return createServer((request, response) => {
    if (request.method !== 'GET' || (request.url ?? '').split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"only GET /metrics is served here"}');
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (error: Error) => response.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: error.message })),
    );
  });
}
