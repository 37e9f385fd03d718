import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { Errors } from '../core/index.ts';
import { httpStatusOf } from './status.ts';

/** What Node passes to a server's 'clientError' listener: a request its HTTP parser refused, or a timeout. */
type ClientError = Error & { code?: string; reason?: string };

/** What Node itself answers a request it cut off: too slow (408), headers too large (431). */
const NODE_ANSWERS: Record<string, { status: number; message: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, message: 'the request did not arrive whole in time' },
  HPE_HEADER_OVERFLOW: { status: 431, message: 'the request headers are larger than the server accepts' },
};

/** The answer to a request Node's HTTP parser refused or cut off, in the protocol's error vocabulary. */
function answerOf(error: ClientError): { status: number; message: string } {
  const node = error.code === undefined ? undefined : NODE_ANSWERS[error.code];
  if (node) return node;
  const reason = error.reason ?? error.message;
  // llhttp's words depend on the order of the headers: "Transfer-Encoding can't be present with Content-Length" or the reverse.
  const refusal =
    /Transfer-Encoding/i.test(reason) && /Content-Length/i.test(reason)
      ? Errors.requestSmuggling(reason)
      : Errors.invalidArg(`the request is not valid HTTP/1.1: ${reason}`);
  return { status: httpStatusOf(refusal.code), message: refusal.message };
}

/**
 * fastify's `clientErrorHandler`: answers on the raw socket, in `{"error": ...}` as every other
 * refusal, then closes the connection (the parser cannot go on reading it). The server goes on.
 */
export function answerClientError(logger: Logger): (error: ClientError, socket: Socket) => void {
  return (error, socket) => {
    // A reset connection has no one to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const { status, message } = answerOf(error);
    logger.debug({ code: error.code, err: error.message }, 'HTTP request refused by the parser');
    if (socket.writable) {
      const body = JSON.stringify({ error: message });
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `Content-Type: application/json\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy(error);
  };
}
