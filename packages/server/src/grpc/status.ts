import { status } from '@grpc/grpc-js';
import { toInferenceServerError, type ErrorCode } from '../core/index.ts';
import type { CallStatus } from './transport/trailers.ts';

/** The gRPC status of each error code, as Triton's gRPC frontend maps them. */
export function grpcStatusOf(code: ErrorCode): status {
  switch (code) {
    case 'INVALID_ARG':
      return status.INVALID_ARGUMENT;
    case 'NOT_FOUND':
      return status.NOT_FOUND;
    case 'UNAVAILABLE':
      return status.UNAVAILABLE;
    case 'RESOURCE_EXHAUSTED':
      return status.RESOURCE_EXHAUSTED;
    case 'UNSUPPORTED':
      return status.UNIMPLEMENTED;
    case 'INTERNAL':
      return status.INTERNAL;
    case 'ALREADY_EXISTS':
      return status.ALREADY_EXISTS;
    case 'UNKNOWN':
      return status.UNKNOWN;
    case 'CANCELLED':
      return status.CANCELLED;
    case 'PERMISSION_DENIED':
      return status.PERMISSION_DENIED;
  }
}

/** Anything thrown by a handler, as the status that ends its call. */
export function callStatusOf(error: unknown): CallStatus {
  const e = toInferenceServerError(error);
  return { code: grpcStatusOf(e.code), details: e.message };
}
