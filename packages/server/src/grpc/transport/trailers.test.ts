import { status } from '@grpc/grpc-js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeGrpcMessage, OK_TRAILERS, trailersOf, trailersOnlyOf } from './trailers.ts';

/** The gRPC spec's decoding: every %XX is a byte, the result UTF-8 (grpcio decodes so). */
function specDecode(text: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '%' && /^[0-9A-Fa-f]{2}$/.test(text.slice(i + 1, i + 3))) {
      bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(text.charCodeAt(i));
  }
  return Buffer.from(bytes).toString('utf8');
}

describe('encodeGrpcMessage', () => {
  it('leaves printable ASCII as it is', () => {
    expect(encodeGrpcMessage("unexpected shape for input 'INPUT0', model 'simple'. Expected [-1,16], got [1,3]")).toBe(
      "unexpected shape for input 'INPUT0', model 'simple'. Expected [-1,16], got [1,3]",
    );
  });

  it('percent-encodes %, control characters and UTF-8 bytes beyond ASCII', () => {
    expect(encodeGrpcMessage('50% done\nhéllo')).toBe('50%25 done%0Ah%C3%A9llo');
  });

  it('decodes back to the message with the spec decoding and with grpc-js (decodeURI)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (message) => {
        const encoded = encodeGrpcMessage(message);
        expect(encoded).toMatch(/^[\x20-\x7e]*$/);
        expect(specDecode(encoded)).toBe(message);
        expect(decodeURI(encoded)).toBe(message);
      }),
    );
  });
});

describe('status trailers', () => {
  it('OK without metadata is the shared trailers object', () => {
    expect(trailersOf({ code: status.OK, details: 'OK' })).toBe(OK_TRAILERS);
  });

  it('carry the code, the encoded message and trailing metadata', () => {
    expect(trailersOf({ code: status.NOT_FOUND, details: 'no 100%', metadata: { 'x-k': 'v', 'x-b-bin': 'AAE=' } })).toEqual({
      'x-k': 'v',
      'x-b-bin': 'AAE=',
      'grpc-status': '5',
      'grpc-message': 'no 100%25',
    });
  });

  it('trailers-only responses carry the response headers too', () => {
    expect(trailersOnlyOf({ code: status.UNAVAILABLE, details: 'later' })).toMatchObject({
      ':status': 200,
      'content-type': 'application/grpc+proto',
      'grpc-status': '14',
      'grpc-message': 'later',
    });
  });
});
