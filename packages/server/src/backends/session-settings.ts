import { gpuProvidersOf } from '../config/execution-accelerators.ts';
import { ConfigFieldError } from '../config/field-error.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { Errors } from '../errors/errors.ts';
import type { SessionSettings } from './backend.ts';

/**
 * Session settings from config.pbtxt, under the parameter names of Triton's onnxruntime
 * backend, so existing configs keep their meaning.
 */
export function sessionSettingsFromConfig(config: ModelConfig): SessionSettings {
  const param = (key: string): string | undefined => config.parameters?.[key]?.string_value;
  const intra = integerParam(config.name, 'intra_op_thread_count', param('intra_op_thread_count'));
  const inter = integerParam(config.name, 'inter_op_thread_count', param('inter_op_thread_count'));
  const executionMode = integerParam(config.name, 'execution_mode', param('execution_mode'));
  const arena = booleanParam(config.name, 'enable_mem_arena', param('enable_mem_arena'));
  const pattern = booleanParam(config.name, 'enable_mem_pattern', param('enable_mem_pattern'));
  const level = config.optimization?.graph?.level;
  const entries = Object.entries(config.parameters ?? {}).flatMap(([key, value]) =>
    key.startsWith(SESSION_CONFIG_PREFIX) && value.string_value !== undefined ? [[key, value.string_value] as const] : [],
  );
  return {
    // Triton: 0 means "let ONNX Runtime decide".
    ...(intra !== undefined && intra > 0 && { intraOpThreads: intra }),
    ...(inter !== undefined && inter > 0 && { interOpThreads: inter }),
    ...(executionMode !== undefined && { executionMode: executionMode === 1 ? 'parallel' : 'sequential' }),
    ...(level !== undefined && { graphOptimizationLevel: graphLevel(level) }),
    ...(arena !== undefined && { enableCpuMemArena: arena }),
    ...(pattern !== undefined && { enableMemPattern: pattern }),
    ...(entries.length > 0 && { sessionConfigEntries: Object.fromEntries(entries) }),
    ...gpuProvidersNamingModel(config),
  };
}

/** A config that came as JSON (a load request) has no file positions: its errors name the model and the field. */
function gpuProvidersNamingModel(config: ModelConfig): Pick<SessionSettings, 'gpuProviders'> {
  try {
    const providers = gpuProvidersOf(config);
    const isDefault = providers.length === 1 && providers[0]!.name === 'cuda' && Object.keys(providers[0]!.options).length === 0;
    return isDefault ? {} : { gpuProviders: providers };
  } catch (error) {
    if (error instanceof ConfigFieldError) throw Errors.invalidArg(`model '${config.name}': ${error.message}`);
    throw error;
  }
}

/** Parameters whose key starts with this are ONNX Runtime session config entries, passed as they are. */
export const SESSION_CONFIG_PREFIX = 'session.';

/** Triton's onnxruntime backend: -1 basic, 1 extended, anything else (0 default) all. */
function graphLevel(level: number): SessionSettings['graphOptimizationLevel'] {
  if (level === -1) return 'basic';
  if (level === 1) return 'extended';
  return 'all';
}

function integerParam(model: string, key: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value.trim());
  if (!Number.isSafeInteger(n) || n < 0) {
    throw Errors.invalidArg(`model '${model}': parameter '${key}' must be a non-negative integer, got '${value}'`);
  }
  return n;
}

function booleanParam(model: string, key: string, value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  if (v === '1' || v === 'true') return true;
  if (v === '0' || v === 'false') return false;
  throw Errors.invalidArg(`model '${model}': parameter '${key}' must be true or false, got '${value}'`);
}
