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

export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}
