import type { Logger } from 'pino';
import { isInferenceServerError } from '../core/index.ts';
import { httpStatusOf } from './status.ts';

/**
 * The status and `{"error": ...}` body of a failed request, as Triton's HTTP frontend answers it,
 * logged as grpc/unary.ts logs a failed call (INTERNAL and unexpected errors are the server's fault).
 * fastify's error handler (http-frontend.ts) and the direct infer path (direct-infer.ts) both answer with it.
 */
export function errorAnswer(
  error: unknown,
  logger: Logger,
  method: string | undefined,
  url: string | undefined,
): { status: number; body: { error: string } } {
  if (isInferenceServerError(error)) {
    const level = error.code === 'INTERNAL' ? 'error' : 'debug';
    logger[level]({ method, url, code: error.code, err: error.message }, 'HTTP request failed');
    return { status: httpStatusOf(error.code), body: { error: error.message } };
  }
  const e = error instanceof Error ? error : new Error(String(error));
  const status = 'statusCode' in e && typeof e.statusCode === 'number' ? e.statusCode : 500;
  if (status >= 500) logger.error({ err: e }, 'unexpected error in HTTP frontend');
  return { status, body: { error: e.message } };
}
