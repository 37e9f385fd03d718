import type { OutgoingHttpHeaders } from 'node:http2';
import { status } from '@grpc/grpc-js';

/** How a call ends: a gRPC status code, its message, and trailing metadata if any. */
export interface CallStatus {
  readonly code: status;
  readonly details: string;
  /** Trailing metadata, as HTTP/2 header fields (`-bin` keys base64). */
  readonly metadata?: OutgoingHttpHeaders;
}

/** What the server takes in `grpc-encoding` (compression.ts), and says so in `grpc-accept-encoding`; it answers uncompressed. */
export const ACCEPT_ENCODING = 'identity,deflate,gzip';

/** The response headers of every call that answers with messages (grpc-js sends the same). */
export const RESPONSE_HEADERS: Readonly<OutgoingHttpHeaders> = Object.freeze({
  ':status': 200,
  'content-type': 'application/grpc+proto',
  'grpc-accept-encoding': ACCEPT_ENCODING,
  'grpc-encoding': 'identity',
});

export const OK_TRAILERS: Readonly<OutgoingHttpHeaders> = Object.freeze({ 'grpc-status': '0', 'grpc-message': 'OK' });

/** Trailers that end a call that has sent its response headers. */
export function trailersOf(end: CallStatus): OutgoingHttpHeaders {
  if (end.code === status.OK && end.metadata === undefined && end.details === 'OK') return OK_TRAILERS;
  return { ...end.metadata, 'grpc-status': String(end.code), 'grpc-message': encodeGrpcMessage(end.details) };
}

/** A trailers-only response: the status in the one HEADERS frame, for a call that sent nothing before. */
export function trailersOnlyOf(end: CallStatus): OutgoingHttpHeaders {
  return {
    ...end.metadata,
    ':status': 200,
    'content-type': 'application/grpc+proto',
    'grpc-accept-encoding': ACCEPT_ENCODING,
    'grpc-status': String(end.code),
    'grpc-message': encodeGrpcMessage(end.details),
  };
}

/**
 * grpc-message as the gRPC spec writes it: the message's UTF-8 bytes, each outside printable ASCII
 * (0x20-0x7E) and each '%' percent-encoded. Every gRPC client decodes it (grpc-js with decodeURI, which
 * leaves no sequence this writes undecoded).
 */
export function encodeGrpcMessage(message: string): string {
  for (let i = 0; i < message.length; i++) {
    const c = message.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) return percentEncode(message);
  }
  return message;
}

function percentEncode(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out += byte < 0x20 || byte > 0x7e || byte === 0x25 ? `%${byte.toString(16).toUpperCase().padStart(2, '0')}` : String.fromCharCode(byte);
  }
  return out;
}
