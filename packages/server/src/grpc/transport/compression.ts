import { gunzip, inflate, type InputType, type ZlibOptions } from 'node:zlib';
import { status } from '@grpc/grpc-js';
import type { CallStatus } from './trailers.ts';

type Inflate = (buffer: InputType, options: ZlibOptions, callback: (error: Error | null, result: Buffer) => void) => void;

const INFLATE_OF: Readonly<Record<string, Inflate>> = { gzip: gunzip, deflate: inflate };

/**
 * A message sent with its compressed flag (the encodings trailers.ts's ACCEPT_ENCODING names), decompressed by the call's `grpc-encoding` (gzip, or
 * deflate: zlib's format, as gRPC names it) within maxBytes once decompressed; grpc-js's words and
 * codes for what fails.
 */
export function decompress(
  message: Buffer,
  encoding: string | undefined,
  maxBytes: number,
  done: (error: CallStatus | undefined, message?: Buffer) => void,
): void {
  const method = encoding === undefined ? undefined : INFLATE_OF[encoding];
  if (method === undefined) {
    if (encoding === undefined || encoding === 'identity') {
      done({ code: status.INTERNAL, details: 'Received a compressed message without a grpc-encoding to decompress it with' });
    } else {
      done({ code: status.UNIMPLEMENTED, details: `Received message compressed with unsupported encoding "${encoding}"` });
    }
    return;
  }
  method(message, { maxOutputLength: Math.max(1, maxBytes) }, (error, result) => {
    if (!error) done(undefined, result);
    else if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      done({ code: status.RESOURCE_EXHAUSTED, details: `Received message that decompresses to a size larger than ${maxBytes}` });
    } else done({ code: status.INTERNAL, details: 'Failed to decompress message' });
  });
}
