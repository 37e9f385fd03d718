import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Errors, type InferenceService } from '../core/index.ts';
import { createHttpFrontend } from './http-frontend.ts';

/** A frontend on a service whose model metadata fails with `error`, and the log lines it writes. */
async function metadataFailure(error: Error): Promise<{ status: number; lines: Record<string, unknown>[] }> {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const service = {
    isReady: () => true,
    modelMetadata: () => {
      throw error;
    },
  } as unknown as InferenceService;
  const app = createHttpFrontend(service, {
    logger: pino({ level: 'debug' }, sink),
    maxBodyBytes: 1024,
    requestTimeoutMs: 10_000,
    keepAliveTimeoutMs: 10_000,
    restrictions: new Map(),
  });
  try {
    const reply = await app.inject({ method: 'GET', url: '/v2/models/m' });
    return { status: reply.statusCode, lines: lines.filter((l) => l['msg'] === 'HTTP request failed') };
  } finally {
    await app.close();
  }
}

describe('HTTP error logging, as grpc/unary.ts logs a failed call', () => {
  it('logs an INTERNAL error at error level with the route and the message', async () => {
    const { status, lines } = await metadataFailure(Errors.internal('the backend broke'));
    expect(status).toBe(500);
    expect(lines).toEqual([expect.objectContaining({ level: 50, method: 'GET', url: '/v2/models/m', code: 'INTERNAL', err: 'the backend broke' })]);
  });

  it('logs a client error at debug level only', async () => {
    const { status, lines } = await metadataFailure(Errors.unknownModel('m'));
    expect(status).toBe(400);
    expect(lines).toEqual([expect.objectContaining({ level: 20, code: 'INVALID_ARG' })]);
  });
});
