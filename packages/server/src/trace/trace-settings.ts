import { Errors } from '../errors/errors.ts';

/**
 * Triton's trace settings. On the wire every value is a string (trace_level a list of
 * strings), as Triton's trace extension sends them; here they are typed.
 */
export interface TraceSettings {
  /** OFF, or TIMESTAMPS (TENSORS is not supported). */
  readonly trace_level: readonly TraceLevel[];
  /** Trace one request in every `trace_rate`. */
  readonly trace_rate: number;
  /** Traces still to collect; -1 = no limit. */
  readonly trace_count: number;
  /** Write the collected traces every this many traces (to `<trace_file>.<n>`); 0 = at shutdown (to `trace_file`). */
  readonly log_frequency: number;
  readonly trace_file: string;
  /** triton: Triton's trace file; opentelemetry: spans exported over OTLP. Chosen at start-up (--trace-config). */
  readonly trace_mode: TraceMode;
}

export type TraceMode = 'triton' | 'opentelemetry';

export type TraceLevel = 'OFF' | 'TIMESTAMPS';
export type TraceSettingName = keyof TraceSettings;
export const TRACE_SETTING_NAMES: readonly TraceSettingName[] = [
  'trace_file',
  'trace_level',
  'trace_rate',
  'trace_count',
  'log_frequency',
  'trace_mode',
];

export const DEFAULT_TRACE_SETTINGS: TraceSettings = {
  trace_level: ['OFF'],
  trace_rate: 1000,
  trace_count: -1,
  log_frequency: 0,
  trace_file: '',
  trace_mode: 'triton',
};

/** A wire value: a string, a list of strings (trace_level), or null / [] to clear a model's own setting. */
export type TraceSettingWireValue = string | readonly string[] | null;

/** What an update changes: a value, or undefined to clear (a model then follows the global setting). */
export type TraceSettingsUpdate = { -readonly [K in TraceSettingName]?: TraceSettings[K] | undefined };

/**
 * Parses an update from either protocol. trace_file cannot be changed over the API (a client
 * could otherwise make the server write anywhere); it is set at start-up with --trace-config.
 */
export function parseTraceSettingsUpdate(raw: Readonly<Record<string, unknown>>): TraceSettingsUpdate {
  const update: TraceSettingsUpdate = {};
  for (const [key, value] of Object.entries(raw)) {
    if (!(TRACE_SETTING_NAMES as readonly string[]).includes(key)) {
      throw Errors.invalidArg(`unknown trace setting '${key}'; known: ${TRACE_SETTING_NAMES.join(', ')}`);
    }
    const name = key as TraceSettingName;
    const cleared = value === null || (Array.isArray(value) && value.length === 0);
    if (name === 'trace_file') {
      throw Errors.invalidArg('trace_file cannot be changed through the API; start the server with --trace-config file=<path>');
    }
    if (cleared) {
      update[name] = undefined;
      continue;
    }
    (update as Record<string, unknown>)[name] = parseValue(name, value);
  }
  return update;
}

export function parseValue(name: TraceSettingName, value: unknown): TraceSettings[TraceSettingName] {
  const values = Array.isArray(value) ? value : [value];
  if (!values.every((v): v is string => typeof v === 'string')) {
    throw Errors.invalidArg(`trace setting '${name}' must be a string or a list of strings, got ${JSON.stringify(value)}`);
  }
  if (name === 'trace_level') return values.map(parseLevel);
  if (values.length !== 1) throw Errors.invalidArg(`trace setting '${name}' takes one value, got ${values.length}`);
  const text = values[0]!;
  switch (name) {
    case 'trace_mode':
      if (text !== 'triton' && text !== 'opentelemetry')
        throw Errors.invalidArg(`trace_mode must be 'triton' or 'opentelemetry', got '${text}'`);
      return text;
    case 'trace_rate':
      return integer(name, text, 1);
    case 'trace_count':
      return integer(name, text, -1);
    case 'log_frequency':
      return integer(name, text, 0);
    default:
      return text;
  }
}

function parseLevel(level: string): TraceLevel {
  const upper = level.toUpperCase();
  if (upper === 'OFF' || upper === 'TIMESTAMPS') return upper;
  if (upper === 'TENSORS') throw Errors.unsupported('trace_level TENSORS is not supported by Batchwise; use TIMESTAMPS');
  throw Errors.invalidArg(`trace_level must be OFF, TIMESTAMPS or TENSORS, got '${level}'`);
}

function integer(name: string, text: string, min: number): number {
  const n = /^-?\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min) throw Errors.invalidArg(`trace setting '${name}' must be an integer >= ${min}, got '${text}'`);
  return n;
}

/** Settings as the wire shows them: every value a string, trace_level a list. */
export function traceSettingsToWire(settings: TraceSettings): Record<TraceSettingName, string | string[]> {
  return {
    trace_file: settings.trace_file,
    trace_level: [...settings.trace_level],
    trace_rate: String(settings.trace_rate),
    trace_count: String(settings.trace_count),
    log_frequency: String(settings.log_frequency),
    trace_mode: settings.trace_mode,
  };
}
