import { promisify } from 'node:util';
import { deflate, gzip } from 'node:zlib';

export type ResponseEncoding = 'gzip' | 'deflate';

/**
 * Replies smaller than this are sent as they are: compressing them costs more than it saves.
 * (Triton compresses every inference reply a client asks it to.)
 */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

const compressors: Record<ResponseEncoding, (body: Buffer) => Promise<Buffer>> = {
  gzip: promisify(gzip),
  deflate: promisify(deflate),
};

/**
 * The encoding of an inference reply, chosen as Triton's HTTP server does (http_server.cc,
 * CompressionTypeUsed): of identity, deflate and gzip, the one the request's Accept-Encoding
 * weighs highest, the first listed on a tie; an encoding at weight 0, or none listed, means
 * identity. Undefined: send the reply as it is.
 */
export function negotiateResponseEncoding(acceptEncoding: string | undefined): ResponseEncoding | undefined {
  if (acceptEncoding === undefined || acceptEncoding === '') return undefined;
  let chosen = 'identity';
  let weight = 0;
  for (const entry of acceptEncoding.split(',')) {
    const [token = '', ...params] = entry.split(';');
    const type = token.trim().toLowerCase();
    if (type !== 'identity' && type !== 'gzip' && type !== 'deflate') continue;
    const q = params.map((p) => /^\s*q\s*=(.*)$/i.exec(p)).find((m) => m !== null);
    const typeWeight = q ? Number.parseFloat(q[1]!) : 1;
    // A weight that is not a number leaves the entry out, as Triton does.
    if (typeWeight > weight) {
      chosen = type;
      weight = typeWeight;
    }
  }
  return chosen === 'identity' ? undefined : (chosen as ResponseEncoding);
}

/** Compresses a reply body off the event loop (zlib's thread pool). */
export function compressResponse(encoding: ResponseEncoding, body: Buffer): Promise<Buffer> {
  return compressors[encoding](body);
}
