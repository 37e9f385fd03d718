import type { Logger } from 'pino';
import { Errors } from '../errors/errors.ts';

/** Triton's logging extension settings (HTTP `/v2/logging`, gRPC LogSettings). */
export interface LogSettings {
  log_file: string;
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
  log_format: string;
}

export type LogSettingValue = string | number | boolean;

const KIND_OF: Readonly<Record<keyof LogSettings, 'boolean' | 'number' | 'string'>> = {
  log_file: 'string',
  log_info: 'boolean',
  log_warning: 'boolean',
  log_error: 'boolean',
  log_verbose_level: 'number',
  log_format: 'string',
};

/** Triton's log settings as seen through the pino logger's one level. */
export function currentLogSettings(logger: Logger): LogSettings {
  const level = logger.level;
  const value = level === 'silent' ? Infinity : (logger.levels.values[level] ?? 30);
  return {
    log_file: '',
    log_info: value <= logger.levels.values['info']!,
    log_warning: value <= logger.levels.values['warn']!,
    log_error: value <= logger.levels.values['error']!,
    log_verbose_level: value <= logger.levels.values['debug']! ? 1 : 0,
    log_format: 'default',
  };
}

/**
 * Applies an update (any subset of the settings) to the logger's level and returns the
 * settings now in force. Child loggers without a level of their own follow it.
 */
export function updateLogSettings(logger: Logger, update: Readonly<Record<string, unknown>>): LogSettings {
  const next = currentLogSettings(logger);
  for (const [key, value] of Object.entries(update)) {
    if (!(key in KIND_OF)) throw Errors.invalidArg(`unknown log setting '${key}'; known: ${Object.keys(KIND_OF).join(', ')}`);
    const name = key as keyof LogSettings;
    const kind = KIND_OF[name];
    const valid = kind === 'number' ? typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 : typeof value === kind;
    if (!valid) throw Errors.invalidArg(`log setting '${key}' needs a ${kind === 'number' ? 'non-negative integer' : kind} value`);
    (next as unknown as Record<string, unknown>)[name] = value;
  }
  if (next.log_file !== '') throw Errors.unsupported('log_file is not supported: Batchwise logs JSON to stdout');
  if (next.log_format !== 'default') {
    throw Errors.unsupported(`log_format '${next.log_format}' is not supported: Batchwise logs JSON ('default')`);
  }
  logger.level = pinoLevelFor(next);
  return currentLogSettings(logger);
}

/** The one pino level that shows what Triton's log settings ask for (the lowest level asked wins). */
export function pinoLevelFor(settings: Pick<LogSettings, 'log_verbose_level' | 'log_info' | 'log_warning' | 'log_error'>): string {
  if (settings.log_verbose_level > 0) return 'debug';
  return settings.log_info ? 'info' : settings.log_warning ? 'warn' : settings.log_error ? 'error' : 'silent';
}
