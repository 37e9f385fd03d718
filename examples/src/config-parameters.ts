/**
 * Reading a model's `parameters { key: "..." value: { string_value: "..." } }` from the config
 * the JavaScript backend hands to `initialize` (Triton's JSON form).
 */
type ConfigParameters = Record<string, { string_value?: string } | undefined>;

export function stringParameter(config: Record<string, unknown>, name: string): string | undefined {
  return (config['parameters'] as ConfigParameters | undefined)?.[name]?.string_value;
}

export function positiveIntegerParameter(config: Record<string, unknown>, name: string, fallback: number): number {
  const text = stringParameter(config, name);
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`parameter ${name} must be a positive integer, got '${text}'`);
  return value;
}
