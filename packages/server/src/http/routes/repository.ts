import type { FastifyInstance } from 'fastify';
import { Errors, FILE_PARAMETER_PREFIX, type InferenceService, type LoadParameter, type LoadParameters } from '../../core/index.ts';
import { describeValue } from '../../tensor/describe-value.ts';
import { parseJsonObject, type JsonObjectOptions } from '../infer-codec.ts';

/** Optional JSON body of a repository request, e.g. `{"ready": true}` or `{"parameters": {...}}`. */
function jsonBody(body: unknown, options?: JsonObjectOptions): Record<string, unknown> {
  if (!Buffer.isBuffer(body) || body.length === 0) return {};
  return parseJsonObject(body, options);
}

/** `ready` of an index request, as Triton reads it: absent is false; not a boolean is refused, however deep it nests. */
function readyOf(body: Record<string, unknown>): boolean {
  const ready = body['ready'];
  if (ready !== undefined && typeof ready !== 'boolean') throw Errors.readyNotBoolean(describeValue(ready));
  return ready === true;
}

function parametersOf(body: Record<string, unknown>): Record<string, unknown> {
  const parameters = body['parameters'];
  if (parameters === undefined) return {};
  if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters)) {
    throw Errors.invalidArg(`'parameters' must be a JSON object, got ${describeValue(parameters)}`);
  }
  return parameters as Record<string, unknown>;
}

/** A boolean field of a repository request, as Triton reads it (TritonJson AsBool). */
function booleanField(value: unknown, name: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') {
    throw Errors.invalidArg(`Unable to parse '${name}': attempt to access JSON non-boolean as boolean (got ${describeValue(value)})`);
  }
  return value;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * HTTP load parameters: `file:` ones are base64 text, decoded only once the core has checked
 * their size; the others keep their JSON type.
 */
function loadParametersOf(json: Record<string, unknown>): LoadParameters {
  const parameters: Record<string, LoadParameter> = {};
  for (const [name, value] of Object.entries(json)) {
    if (name.startsWith(FILE_PARAMETER_PREFIX) && typeof value === 'string') {
      if (value.length % 4 !== 0 || !BASE64.test(value))
        throw Errors.invalidArg(`load parameter '${name}' must be base64 text (the file's bytes)`);
      parameters[name] = { type: 'BYTES', byteLength: Buffer.byteLength(value, 'base64'), bytes: () => Buffer.from(value, 'base64') };
    } else if (typeof value === 'string') parameters[name] = { type: 'STRING', value };
    else if (typeof value === 'boolean') parameters[name] = { type: 'BOOL', value };
    else if (typeof value === 'number') parameters[name] = { type: Number.isInteger(value) ? 'INT' : 'DOUBLE', value };
    else throw Errors.invalidArg(`load parameter '${name}' must be a string, number or boolean, got ${describeValue(value)}`);
  }
  return parameters;
}

export function registerRepositoryRoutes(app: FastifyInstance, service: InferenceService): void {
  app.post('/v2/repository/index', { config: { apiGroup: 'model-repository' } }, async (request) => {
    return service.repositoryIndex(readyOf(jsonBody(request.body, { checkFirst: readyOf })));
  });
  app.post<{ Params: { model: string } }>(
    '/v2/repository/models/:model/load',
    { config: { apiGroup: 'model-repository' } },
    async (request, reply) => {
      await service.loadModel(request.params.model, loadParametersOf(parametersOf(jsonBody(request.body))));
      return reply.code(200).send();
    },
  );
  app.post<{ Params: { model: string } }>(
    '/v2/repository/models/:model/unload',
    { config: { apiGroup: 'model-repository' } },
    async (request, reply) => {
      const unloadDependents = booleanField(parametersOf(jsonBody(request.body))['unload_dependents'], 'unload_dependents');
      await service.unloadModel(request.params.model, { unloadDependents });
      return reply.code(200).send();
    },
  );
}
