import type { Logger } from 'pino';
import { Errors } from '../core/index.ts';
import type { LogSettingValueWire } from './wire-types.ts';

interface LogSettings {
  log_file: string;
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
  log_format: string;
}

type SettingKind = 'bool_param' | 'uint32_param' | 'string_param';
const KIND_OF: Readonly<Record<keyof LogSettings, SettingKind>> = {
  log_file: 'string_param',
  log_info: 'bool_param',
  log_warning: 'bool_param',
  log_error: 'bool_param',
  log_verbose_level: 'uint32_param',
  log_format: 'string_param',
};

/** Triton's log settings as seen through the pino logger's one level. */
export function currentLogSettings(logger: Logger): LogSettings {
  const level = logger.level;
  const value = level === 'silent' ? Infinity : logger.levels.values[level] ?? 30;
  return {
    log_file: '',
    log_info: value <= logger.levels.values['info']!,
    log_warning: value <= logger.levels.values['warn']!,
    log_error: value <= logger.levels.values['error']!,
    log_verbose_level: value <= logger.levels.values['debug']! ? 1 : 0,
    log_format: 'default',
  };
}

/** Applies LogSettings to the logger's level and returns the settings now in force. */
export function updateLogSettings(logger: Logger, update: Record<string, LogSettingValueWire>): LogSettings {
  const next = currentLogSettings(logger);
  for (const [key, value] of Object.entries(update)) {
    if (!(key in KIND_OF)) throw Errors.invalidArg(`unknown log setting '${key}'`);
    const name = key as keyof LogSettings;
    const kind = KIND_OF[name];
    if (value.parameter_choice !== kind) {
      throw Errors.invalidArg(`log setting '${key}' needs a ${kind.replace('_param', '')} value`);
    }
    (next as unknown as Record<string, unknown>)[name] = value[kind];
  }
  if (next.log_file !== '') throw Errors.unsupported('log_file is not supported: Batchwise logs JSON to stdout');
  if (next.log_format !== 'default') {
    throw Errors.unsupported(`log_format '${next.log_format}' is not supported: Batchwise logs JSON ('default')`);
  }
  logger.level = next.log_verbose_level > 0
    ? 'debug'
    : next.log_info ? 'info' : next.log_warning ? 'warn' : next.log_error ? 'error' : 'silent';
  return currentLogSettings(logger);
}

export function toLogSettingsWire(settings: LogSettings): Record<string, LogSettingValueWire> {
  const out: Record<string, LogSettingValueWire> = {};
  for (const [key, value] of Object.entries(settings)) {
    const kind = KIND_OF[key as keyof LogSettings];
    out[key] = { [kind]: value };
  }
  return out;
}
