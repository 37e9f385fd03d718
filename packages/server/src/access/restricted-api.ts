import { timingSafeEqual, createHash } from 'node:crypto';

/** Triton's API groups that `--http-restricted-api` / `--grpc-restricted-protocol` can restrict. */
export const API_GROUPS = [
  'health',
  'metadata',
  'inference',
  'shared-memory',
  'model-config',
  'model-repository',
  'statistics',
  'trace',
  'logging',
] as const;
export type ApiGroup = (typeof API_GROUPS)[number];

export interface Restriction {
  /** Header name, lower case. */
  readonly header: string;
  readonly digest: Buffer;
}

/** Which groups need which header; groups not listed are open. */
export type RestrictionTable = ReadonlyMap<ApiGroup, Restriction>;

const GROUP_SET: ReadonlySet<string> = new Set(API_GROUPS);

/**
 * Parses Triton's flag syntax `<api>[,<api>...]:<key>=<value>`; several flags may be given.
 * A group restricted twice is an error, as in Triton.
 */
export function parseRestrictions(flags: readonly string[], headerPrefix = ''): RestrictionTable {
  const table = new Map<ApiGroup, Restriction>();
  for (const flag of flags) {
    const colon = flag.indexOf(':');
    const equals = flag.indexOf('=', colon + 1);
    if (colon <= 0 || equals <= colon + 1 || equals === flag.length - 1) {
      throw new Error(`restricted API flag must be <api>[,<api>...]:<key>=<value>, got '${redact(flag)}'`);
    }
    const groups = flag
      .slice(0, colon)
      .split(',')
      .map((g) => g.trim());
    const header = (headerPrefix + flag.slice(colon + 1, equals).trim()).toLowerCase();
    const value = flag.slice(equals + 1);
    for (const group of groups) {
      if (!GROUP_SET.has(group)) {
        throw new Error(`unknown API group '${group}' in restricted API flag; known groups: ${API_GROUPS.join(', ')}`);
      }
      if (table.has(group as ApiGroup)) throw new Error(`API group '${group}' is restricted more than once`);
      table.set(group as ApiGroup, { header, digest: digestOf(value) });
    }
  }
  return table;
}

/** True when the group is open or the presented value matches, compared in constant time. */
export function isAllowed(table: RestrictionTable, group: ApiGroup, presented: string | undefined): boolean {
  const restriction = table.get(group);
  if (!restriction) return true;
  if (presented === undefined) return false;
  return timingSafeEqual(digestOf(presented), restriction.digest);
}

// Comparing fixed-length digests keeps the comparison constant-time whatever the lengths.
function digestOf(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

function redact(flag: string): string {
  const equals = flag.lastIndexOf('=');
  return equals < 0 ? flag : `${flag.slice(0, equals + 1)}***`;
}
