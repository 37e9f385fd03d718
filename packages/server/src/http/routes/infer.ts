import type { FastifyInstance } from 'fastify';
import type { InferenceService } from '../../core/index.ts';
import { decodeHttpInferRequest, encodeHttpInferResponse } from '../infer-codec.ts';

interface ModelParams {
  model: string;
  version?: string;
}

const HEADER_LENGTH = 'inference-header-content-length';

/**
 * As Triton (the request object is created for a model before its body is parsed): a request
 * for an unknown model or version gets that error whatever its body holds.
 */
function assertModelResolvable(service: InferenceService, model: string, version: string | undefined): void {
  // Throws the unknown-model, unknown-version or not-ready error; the ready path costs one lookup.
  if (!service.isModelReady(model, version)) service.modelMetadata(model, version);
}

export function registerInferRoutes(app: FastifyInstance, service: InferenceService): void {
  const handler = async (
    request: { params: ModelParams; body: unknown; headers: Record<string, string | string[] | undefined> },
    reply: import('fastify').FastifyReply,
  ) => {
    assertModelResolvable(service, request.params.model, request.params.version);
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const headerLength = request.headers[HEADER_LENGTH];
    const inferRequest = decodeHttpInferRequest(
      body,
      Array.isArray(headerLength) ? headerLength[0] : headerLength,
      request.params.model,
      request.params.version,
    );
    const response = await service.infer(inferRequest);
    const encoded = encodeHttpInferResponse(response, inferRequest);
    if (encoded.headerLength !== undefined) void reply.header('Inference-Header-Content-Length', encoded.headerLength);
    return reply
      .code(200)
      .type(encoded.contentType)
      .send(encoded.chunks.length === 1 ? encoded.chunks[0] : Buffer.concat(encoded.chunks));
  };
  // A body that could not be admitted is refused from its Content-Length, before it is read.
  const onRequest = async (request: { headers: Record<string, string | string[] | undefined> }) => {
    const length = Number(request.headers['content-length']);
    if (Number.isFinite(length) && length > 0) service.assertAdmissible(length);
  };
  const options = { config: { apiGroup: 'inference' as const }, onRequest };
  app.post<{ Params: ModelParams }>('/v2/models/:model/infer', options, handler);
  app.post<{ Params: ModelParams }>('/v2/models/:model/versions/:version/infer', options, handler);
}
