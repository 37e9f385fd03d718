import { parseValue, type TraceSettingName, type TraceSettings } from './trace-settings.ts';

/** Where and how spans go in mode opentelemetry (Triton's `opentelemetry,<key>=<value>` settings). */
export interface OpenTelemetryConfig {
  /** The OTLP HTTP traces endpoint. */
  readonly url: string;
  /** Resource attributes; service.name defaults to batchwise. */
  readonly resource: Readonly<Record<string, string>>;
  readonly bspMaxExportBatchSize: number;
  readonly bspScheduleDelayMs: number;
  readonly bspMaxQueueSize: number;
}

export interface TraceConfig {
  readonly settings: Partial<TraceSettings>;
  readonly opentelemetry: OpenTelemetryConfig;
}

/** Triton's defaults (the OTel SDK's BatchSpanProcessor defaults, and its collector URL). */
export const DEFAULT_OPENTELEMETRY_CONFIG: OpenTelemetryConfig = {
  url: 'http://localhost:4318/v1/traces',
  resource: { 'service.name': 'batchwise' },
  bspMaxExportBatchSize: 512,
  bspScheduleDelayMs: 5000,
  bspMaxQueueSize: 2048,
};

const GLOBAL_KEYS: Record<string, TraceSettingName> = {
  level: 'trace_level',
  rate: 'trace_rate',
  count: 'trace_count',
  mode: 'trace_mode',
};
const TRITON_KEYS: Record<string, TraceSettingName> = { file: 'trace_file', 'log-frequency': 'log_frequency' };
const OPENTELEMETRY_KEYS = ['url', 'resource', 'bsp_max_export_batch_size', 'bsp_schedule_delay', 'bsp_max_queue_size'] as const;
type OpenTelemetryKey = (typeof OPENTELEMETRY_KEYS)[number];

const SYNTAX =
  `--trace-config takes [<mode>,]<key>=<value>: global keys ${Object.keys(GLOBAL_KEYS).join(', ')}; ` +
  `triton keys ${Object.keys(TRITON_KEYS).join(', ')}; opentelemetry keys ${OPENTELEMETRY_KEYS.join(', ')}`;

/**
 * Triton's `--trace-config` flags: `<key>=<value>` for the global keys, `triton,<key>=<value>` and
 * `opentelemetry,<key>=<value>` for each mode's own (the mode prefix may be left out, the key tells).
 * Setting an opentelemetry key chooses mode opentelemetry unless `mode=triton` says otherwise, which is an error.
 */
export function parseTraceConfigFlags(flags: readonly string[]): TraceConfig {
  const settings: Record<string, unknown> = {};
  const otel: { -readonly [K in keyof OpenTelemetryConfig]: OpenTelemetryConfig[K] } = {
    ...DEFAULT_OPENTELEMETRY_CONFIG,
    resource: { ...DEFAULT_OPENTELEMETRY_CONFIG.resource },
  };
  const modeKeys: { triton?: string; opentelemetry?: string } = {};
  for (const flag of flags) {
    const comma = flag.indexOf(',');
    const equals = flag.indexOf('=');
    const prefixed = comma > 0 && (equals < 0 || comma < equals);
    const mode = prefixed ? flag.slice(0, comma) : undefined;
    const spec = prefixed ? flag.slice(comma + 1) : flag;
    const at = spec.indexOf('=');
    if (mode !== undefined && mode !== 'triton' && mode !== 'opentelemetry') {
      throw new Error(`--trace-config: unknown trace mode '${mode}' in '${flag}' (triton or opentelemetry). ${SYNTAX}`);
    }
    if (at <= 0) throw new Error(`--trace-config: '${flag}' is not [<mode>,]<key>=<value>. ${SYNTAX}`);
    const key = spec.slice(0, at);
    const value = spec.slice(at + 1);
    if (mode === undefined && Object.hasOwn(GLOBAL_KEYS, key)) {
      const name = GLOBAL_KEYS[key]!;
      settings[name] = parseValue(name, name === 'trace_level' ? value.split(',') : value);
    } else if (mode !== 'opentelemetry' && Object.hasOwn(TRITON_KEYS, key)) {
      const name = TRITON_KEYS[key]!;
      settings[name] = name === 'trace_file' ? value : parseValue(name, value);
      modeKeys.triton ??= key;
    } else if (mode !== 'triton' && (OPENTELEMETRY_KEYS as readonly string[]).includes(key)) {
      setOpenTelemetryKey(otel, key as OpenTelemetryKey, value);
      modeKeys.opentelemetry ??= key;
    } else {
      throw new Error(`--trace-config: unknown key '${key}'${mode ? ` for mode ${mode}` : ''} in '${flag}'. ${SYNTAX}`);
    }
  }
  if (modeKeys.opentelemetry !== undefined) {
    if (settings.trace_mode === 'triton') {
      throw new Error(`--trace-config: opentelemetry key '${modeKeys.opentelemetry}' given with mode=triton`);
    }
    settings.trace_mode = 'opentelemetry';
  }
  if (settings.trace_mode === 'opentelemetry' && modeKeys.triton !== undefined) {
    throw new Error(`--trace-config: triton key '${modeKeys.triton}' given with mode opentelemetry (spans go to the OTLP url, not a file)`);
  }
  return { settings: settings as Partial<TraceSettings>, opentelemetry: otel };
}

function setOpenTelemetryKey(
  otel: { -readonly [K in keyof OpenTelemetryConfig]: OpenTelemetryConfig[K] },
  key: OpenTelemetryKey,
  value: string,
): void {
  switch (key) {
    case 'url':
      if (value === '') throw new Error('--trace-config opentelemetry,url needs a value');
      // Triton's examples give host:port/path without a scheme.
      otel.url = /^https?:\/\//.test(value) ? value : `http://${value}`;
      return;
    case 'resource': {
      const at = value.indexOf('=');
      if (at <= 0) throw new Error(`--trace-config opentelemetry,resource takes <key>=<value>, got '${value}'`);
      otel.resource = { ...otel.resource, [value.slice(0, at)]: value.slice(at + 1) };
      return;
    }
    case 'bsp_max_export_batch_size':
      otel.bspMaxExportBatchSize = positiveInteger(key, value);
      return;
    case 'bsp_schedule_delay':
      otel.bspScheduleDelayMs = positiveInteger(key, value);
      return;
    case 'bsp_max_queue_size':
      otel.bspMaxQueueSize = positiveInteger(key, value);
      return;
  }
}

function positiveInteger(key: string, text: string): number {
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`--trace-config opentelemetry,${key} must be an integer >= 1, got '${text}'`);
  return n;
}
