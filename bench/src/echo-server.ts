/**
 * A bare fastify endpoint that answers a KServe binary infer request with the same bytes it
 * received, shaped like the server's reply: the floor of what any HTTP server on Node costs.
 * Run as a child process; prints {"port": N} when listening.
 */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
app.post('/v2/models/:model/infer', async (request, reply) => {
  const body = request.body as Buffer;
  const headerLength = Number(request.headers['inference-header-content-length'] ?? body.length);
  const header = JSON.parse(body.subarray(0, headerLength).toString('utf8')) as {
    inputs: { datatype: string; shape: number[]; parameters?: { binary_data_size?: number } }[];
  };
  const input = header.inputs[0]!;
  const bytes = body.subarray(headerLength);
  const json = Buffer.from(
    JSON.stringify({
      model_name: (request.params as { model: string }).model,
      model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: input.datatype, shape: input.shape, parameters: { binary_data_size: bytes.length } }],
    }),
  );
  return reply
    .header('Inference-Header-Content-Length', json.length)
    .type('application/octet-stream')
    .send(Buffer.concat([json, bytes]));
});
await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
