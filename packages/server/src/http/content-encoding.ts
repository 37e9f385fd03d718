import { createGunzip, createInflate } from 'node:zlib';
import type { FastifyInstance } from 'fastify';

/**
 * Request bodies may be compressed as Triton's clients do (`Content-Encoding: gzip` or
 * `deflate`); the body limit still applies to the decompressed bytes. Other encodings are refused.
 */
export function registerContentEncoding(app: FastifyInstance): void {
  app.addHook('preParsing', async (request, _reply, payload) => {
    const encoding = request.headers['content-encoding']?.trim().toLowerCase();
    if (encoding === undefined || encoding === '' || encoding === 'identity') return payload;
    if (encoding === 'gzip' || encoding === 'deflate') {
      const decoded = payload.pipe(encoding === 'gzip' ? createGunzip() : createInflate());
      payload.on('error', (error) => decoded.destroy(error));
      // fastify checks Content-Length against the encoded bytes it is told about here.
      const counted = decoded as typeof decoded & { receivedEncodedLength: number };
      counted.receivedEncodedLength = 0;
      payload.on('data', (chunk: Buffer) => (counted.receivedEncodedLength += chunk.length));
      return counted;
    }
    throw Object.assign(new Error(`unsupported Content-Encoding '${encoding}'; use gzip, deflate or none`), { statusCode: 415 });
  });
}
