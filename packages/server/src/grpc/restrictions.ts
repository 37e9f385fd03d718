import { status } from '@grpc/grpc-js';
import { isAllowed, type ApiGroup, type RestrictionTable } from '../access/restricted-api.ts';
import type { MethodHandler, ServerCall } from './transport/server-call.ts';
import type { CallStatus } from './transport/trailers.ts';

/** Triton's grouping of GRPCInferenceService RPCs for --grpc-restricted-protocol. */
export const API_GROUP_OF: Readonly<Record<string, ApiGroup>> = {
  ServerLive: 'health',
  ServerReady: 'health',
  ModelReady: 'health',
  ServerMetadata: 'metadata',
  ModelMetadata: 'metadata',
  ModelInfer: 'inference',
  ModelStreamInfer: 'inference',
  ModelConfig: 'model-config',
  ModelStatistics: 'statistics',
  RepositoryIndex: 'model-repository',
  RepositoryModelLoad: 'model-repository',
  RepositoryModelUnload: 'model-repository',
  SystemSharedMemoryStatus: 'shared-memory',
  SystemSharedMemoryRegister: 'shared-memory',
  SystemSharedMemoryUnregister: 'shared-memory',
  CudaSharedMemoryStatus: 'shared-memory',
  CudaSharedMemoryRegister: 'shared-memory',
  CudaSharedMemoryUnregister: 'shared-memory',
  TraceSetting: 'trace',
  LogSettings: 'logging',
};

/**
 * Guards restricted RPCs: a call must carry the group's metadata key with the configured
 * value, or it fails with UNAVAILABLE and Triton's message. Decided once, when registering.
 */
export function restrictHandlers(handlers: Record<string, MethodHandler>, table: RestrictionTable): Record<string, MethodHandler> {
  if (table.size === 0) return handlers;
  const out: Record<string, MethodHandler> = {};
  for (const [method, handler] of Object.entries(handlers)) {
    const group = API_GROUP_OF[method];
    const restriction = group && table.get(group);
    out[method] = restriction ? guard(handler, group, table, restriction.header) : handler;
  }
  return out;
}

function guard(handler: MethodHandler, group: ApiGroup, table: RestrictionTable, header: string): MethodHandler {
  const refusal: CallStatus = { code: status.UNAVAILABLE, details: `This protocol is restricted, expecting header '${header}'` };
  // parseRestrictions lowercases the header, as metadata keys travel.
  const allowed = (call: ServerCall) => isAllowed(table, group, call.metadataValue(header));
  if (handler.streaming) {
    return { streaming: true, handle: (call) => (allowed(call) ? handler.handle(call) : call.end(refusal)) };
  }
  return { streaming: false, handle: (call, message) => (allowed(call) ? handler.handle(call, message) : call.end(refusal)) };
}
