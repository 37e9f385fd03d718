/** What frontends may use from the core. */
export type { BodyTarget, ElementCensus, InferenceService, InferOptions } from './types.ts';
export type { InferenceStream, StreamEvent } from './response-stream.ts';
export type {
  InferenceRequest,
  InferenceResponse,
  ModelMetadata,
  ModelStatistics,
  RepositoryIndexEntry,
  RequestedOutput,
  RequestInput,
  ResponseOutput,
  ServerMetadata,
} from '../protocol/types.ts';
export { refusalDue } from './refusal-due.ts';
export type { ObjectiveRefusal } from '../scheduler/scheduler.ts';
export { Errors, InferenceServerError, isInferenceServerError, toInferenceServerError } from '../errors/errors.ts';
export type { ErrorCode } from '../errors/errors.ts';
export { FILE_PARAMETER_PREFIX } from '../models/load-parameters.ts';
export type { LoadParameter, LoadParameters } from '../models/load-parameters.ts';
export type { MemoryReservation } from '../memory/memory-guard.ts';
export type { LogSettings, LogSettingValue } from '../logging/log-settings.ts';
export { parseTraceSettingsUpdate, traceSettingsToWire } from '../trace/trace-settings.ts';
export { inputSharedMemoryRefOf, sharedMemoryRefOf } from '../shared-memory/request-shared-memory.ts';
export { jsonParseBytes, JSON_VALUE_BYTES } from '../memory/element-cost.ts';
export { modelConfigToJson } from '../config/index.ts';
export { CANARY_KEY_HEADER } from '../repository/canary-declaration.ts';
