/** What frontends may use from the core. */
export type {
  InferenceRequest,
  InferenceResponse,
  BodyTarget,
  ElementCensus,
  InferenceService,
  InferOptions,
  ModelMetadata,
  ModelStatistics,
  RepositoryIndexEntry,
  RequestedOutput,
  RequestInput,
  ResponseOutput,
  ServerMetadata,
} from './types.ts';
export { Errors, InferenceServerError, isInferenceServerError, toInferenceServerError } from './errors.ts';
export type { ErrorCode } from './errors.ts';
export { FILE_PARAMETER_PREFIX } from './load-parameters.ts';
export type { LoadParameter, LoadParameters } from './load-parameters.ts';
export type { MemoryReservation } from '../memory/memory-guard.ts';
