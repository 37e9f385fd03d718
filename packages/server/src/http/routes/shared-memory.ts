import type { FastifyInstance, FastifyReply } from 'fastify';
import { Errors, type InferenceService } from '../../core/index.ts';
import { describeValue } from '../../tensor/describe-value.ts';
import { parseJsonObject } from '../infer-codec.ts';

interface RegionParams {
  name: string;
}

const options = { config: { apiGroup: 'shared-memory' as const } };

/**
 * Triton's shared memory extension: system shared memory works. CUDA shared memory holds no region: its
 * status lists none, unregistering succeeds, registering says it is not supported.
 */
export function registerSharedMemoryRoutes(app: FastifyInstance, service: InferenceService): void {
  app.get('/v2/systemsharedmemory/status', options, async () => service.systemSharedMemoryStatus());
  app.get<{ Params: RegionParams }>('/v2/systemsharedmemory/region/:name/status', options, async (request) =>
    service.systemSharedMemoryStatus(request.params.name),
  );
  app.post<{ Params: RegionParams }>('/v2/systemsharedmemory/region/:name/register', options, async (request, reply) => {
    const body = Buffer.isBuffer(request.body) && request.body.length > 0 ? parseJsonObject(request.body) : {};
    const key = body['key'];
    if (typeof key !== 'string' || key === '') {
      throw Errors.invalidArg(`registering a shared memory region needs a string 'key', got ${describeValue(key)}`);
    }
    await service.registerSystemSharedMemory(
      request.params.name,
      key,
      size(body['offset'] ?? 0, 'offset'),
      size(body['byte_size'], 'byte_size'),
    );
    return reply.code(200).send();
  });
  app.post('/v2/systemsharedmemory/unregister', options, async (_request, reply) => {
    await service.unregisterSystemSharedMemory();
    return reply.code(200).send();
  });
  app.post<{ Params: RegionParams }>('/v2/systemsharedmemory/region/:name/unregister', options, async (request, reply) => {
    await service.unregisterSystemSharedMemory(request.params.name);
    return reply.code(200).send();
  });

  app.get('/v2/cudasharedmemory/status', options, async () => service.cudaSharedMemoryStatus());
  app.get<{ Params: RegionParams }>('/v2/cudasharedmemory/region/:name/status', options, async (request) =>
    service.cudaSharedMemoryStatus(request.params.name),
  );
  app.post('/v2/cudasharedmemory/region/:name/register', options, async () => {
    throw Errors.cudaSharedMemoryUnsupported();
  });
  const nothingToUnregister = async (_request: unknown, reply: FastifyReply) => reply.code(200).send();
  app.post('/v2/cudasharedmemory/unregister', options, nothingToUnregister);
  app.post('/v2/cudasharedmemory/region/:name/unregister', options, nothingToUnregister);
}

function size(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw Errors.invalidArg(`registering a shared memory region needs '${field}' as a non-negative integer, got ${describeValue(value)}`);
  }
  return value;
}
