import {
  status,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type UntypedHandleCall,
  type UntypedServiceImplementation,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { isAllowed, type ApiGroup, type RestrictionTable } from '../access/restricted-api.ts';

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
export function restrictHandlers(handlers: UntypedServiceImplementation, table: RestrictionTable): UntypedServiceImplementation {
  if (table.size === 0) return handlers;
  const out: UntypedServiceImplementation = {};
  for (const [method, handler] of Object.entries(handlers)) {
    const group = API_GROUP_OF[method];
    const restriction = group && table.get(group);
    out[method] = restriction ? guard(method, handler, group, table, restriction.header) : handler;
  }
  return out;
}

const STREAMING: ReadonlySet<string> = new Set(['ModelStreamInfer']);

function guard(method: string, handler: UntypedHandleCall, group: ApiGroup, table: RestrictionTable, header: string): UntypedHandleCall {
  const refusal = () =>
    Object.assign(new Error(`This protocol is restricted, expecting header '${header}'`), {
      code: status.UNAVAILABLE,
      details: `This protocol is restricted, expecting header '${header}'`,
    });
  const allowed = (call: { metadata: { get(key: string): unknown[] } }) => {
    const value = call.metadata.get(header)[0];
    return isAllowed(table, group, typeof value === 'string' ? value : undefined);
  };
  if (!STREAMING.has(method)) {
    const unaryHandler = handler as (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => void;
    return ((call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) =>
      allowed(call) ? unaryHandler(call, callback) : callback(refusal())) as UntypedHandleCall;
  }
  const streamHandler = handler as (call: ServerDuplexStream<unknown, unknown>) => void;
  return ((call: ServerDuplexStream<unknown, unknown>) =>
    allowed(call) ? streamHandler(call) : call.emit('error', refusal())) as UntypedHandleCall;
}
