import { Errors } from '../errors/errors.ts';

/** Triton's `--backend-config=<backend>,<setting>=<value>` values, by backend then setting. */
export type BackendConfig = ReadonlyMap<string, ReadonlyMap<string, string>>;

/**
 * The settings this server applies, by backend; any other is accepted (a Triton command line still
 * starts) and named in a warning.
 */
export const APPLIED_BACKEND_SETTINGS: Readonly<Record<string, readonly string[]>> = {
  python: ['shm-default-byte-size', 'shm-growth-byte-size'],
};

/**
 * Reads `--backend-config` values as Triton does: `<backend>,<setting>=<value>`, or `<setting>=<value>`
 * for every backend (stored under ''). Throws, naming the value, when one has neither form.
 */
export function parseBackendConfigFlags(values: readonly string[] = []): BackendConfig {
  const config = new Map<string, Map<string, string>>();
  for (const value of values) {
    const comma = value.indexOf(',');
    const backend = comma < 0 ? '' : value.slice(0, comma);
    const setting = comma < 0 ? value : value.slice(comma + 1);
    const equals = setting.indexOf('=');
    if (equals <= 0) {
      throw Errors.invalidArg(
        `--backend-config '${value}' must be <backend>,<setting>=<value> (e.g. python,shm-default-byte-size=4194304)`,
      );
    }
    let settings = config.get(backend);
    if (!settings) config.set(backend, (settings = new Map()));
    settings.set(setting.slice(0, equals), setting.slice(equals + 1));
  }
  return config;
}

/** The settings given that this server does not apply, as `<backend>,<setting>` (for a warning). */
export function unappliedBackendSettings(config: BackendConfig): string[] {
  const unapplied: string[] = [];
  for (const [backend, settings] of config) {
    for (const setting of settings.keys()) {
      if (!APPLIED_BACKEND_SETTINGS[backend]?.includes(setting)) unapplied.push(backend ? `${backend},${setting}` : setting);
    }
  }
  return unapplied;
}

/** A byte count setting of a backend: a positive whole number, or undefined when not given. */
export function backendByteSetting(config: BackendConfig, backend: string, setting: string): number | undefined {
  const text = config.get(backend)?.get(setting);
  if (text === undefined) return undefined;
  const bytes = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(bytes) || bytes <= 0) {
    throw Errors.invalidArg(`--backend-config=${backend},${setting}=${text}: the value must be a positive number of bytes`);
  }
  return bytes;
}
