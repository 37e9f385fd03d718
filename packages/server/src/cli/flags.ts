import { InvalidArgumentError } from 'commander';

/** Triton-style boolean flag values: `--allow-http`, `--allow-http=false`, `--allow-http 0`. */
export function parseBool(value: string | undefined): boolean {
  if (value === undefined) return true;
  switch (value.trim().toLowerCase()) {
    case '':
    case 'true':
    case '1':
    case 'on':
    case 'yes':
      return true;
    case 'false':
    case '0':
    case 'off':
    case 'no':
      return false;
    default:
      throw new InvalidArgumentError(`expected true or false, got '${value}'`);
  }
}

export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new InvalidArgumentError(`expected a port number 0-65535, got '${value}'`);
  }
  return port;
}

export function parsePositiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError(`expected a positive integer, got '${value}'`);
  return n;
}

/** An http:// or https:// URL (a server, a metrics endpoint); an empty value is no URL. */
export function parseHttpUrl(value: string): string {
  const protocol = URL.canParse(value) ? new URL(value).protocol : undefined;
  if (protocol !== 'http:' && protocol !== 'https:') throw new InvalidArgumentError(`expected an http:// or https:// URL, got '${value}'`);
  return value;
}

/** A number of zero or more (seconds, a level, a ratio). */
export function parseNonNegativeNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`expected a number of 0 or more, got '${value}'`);
  return n;
}

/** A parser that throws plain errors, as commander's option parser (commander then names the option and the value). */
export function optionParser<T>(parse: (value: string) => T): (value: string) => T {
  return (value) => {
    try {
      return parse(value);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message);
    }
  };
}

export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}
