/**
 * The HTTP side of the bench's peers (bench/src/echo-server.ts, bench/src/naive-server.ts): fastify
 * answering a KServe v2 binary infer request (`Inference-Header-Content-Length`, the first input's
 * bytes after the JSON header) with one binary output in the server's reply shape. Run in a child
 * process; prints {"port": N} when listening (startPeer in bench/src/scenarios/overhead.ts reads it).
 */
import Fastify from 'fastify';

/** The request's first input: its header entry and its bytes (a view on the received body). */
export interface PeerInput {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
  readonly bytes: Buffer;
}

/** The one output a peer answers with. */
export interface PeerOutput {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
  readonly bytes: Uint8Array;
}

export async function servePeer(answer: (input: PeerInput) => PeerOutput | Promise<PeerOutput>): Promise<void> {
  const app = Fastify({ logger: false });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.post('/v2/models/:model/infer', async (request, reply) => {
    const body = request.body as Buffer;
    const headerLength = Number(request.headers['inference-header-content-length'] ?? body.length);
    const header = JSON.parse(body.subarray(0, headerLength).toString('utf8')) as {
      inputs: { name: string; datatype: string; shape: number[] }[];
    };
    const output = await answer({ ...header.inputs[0]!, bytes: body.subarray(headerLength) });
    const json = Buffer.from(
      JSON.stringify({
        model_name: (request.params as { model: string }).model,
        model_version: '1',
        outputs: [
          { name: output.name, datatype: output.datatype, shape: output.shape, parameters: { binary_data_size: output.bytes.length } },
        ],
      }),
    );
    return reply
      .header('Inference-Header-Content-Length', json.length)
      .type('application/octet-stream')
      .send(Buffer.concat([json, output.bytes]));
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`);
  process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
}
