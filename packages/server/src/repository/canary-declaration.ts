import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isVersionName } from './model-folder.ts';

/** The file beside config.pbtxt that declares a model's canary release. */
export const CANARY_FILE = 'canary.json';

/** Where a request's stickiness key comes from (the header is gRPC metadata on gRPC). */
export type StickinessSource = 'header' | 'parameter' | 'none';

/** The HTTP header and gRPC metadata key that carries a stickiness key. */
export const CANARY_KEY_HEADER = 'batchwise-canary-key';
/** The request parameter that carries a stickiness key. */
export const CANARY_KEY_PARAMETER = 'canary_key';

export interface CanaryRollbackThresholds {
  /** The window the figures are compared over, seconds. */
  readonly windowSeconds: number;
  /** Requests each version needs in the window before it is judged. */
  readonly minRequests: number;
  /** Largest canary error rate minus stable error rate (0..1) that is tolerated. */
  readonly maxErrorRateIncrease: number;
  /** Largest canary p99 / stable p99 that is tolerated. */
  readonly maxP99Ratio: number;
}

export interface CanaryDeclaration {
  readonly stableVersion: string;
  readonly canaryVersion: string;
  /** Percent of the requests that name no version which go to the canary, 0..100. */
  readonly canaryWeight: number;
  readonly stickiness: StickinessSource;
  readonly rollback: CanaryRollbackThresholds;
}

export const DEFAULT_ROLLBACK: CanaryRollbackThresholds = {
  windowSeconds: 60,
  minRequests: 50,
  maxErrorRateIncrease: 0.05,
  maxP99Ratio: 2,
};

/** The declaration as written in canary.json (snake_case, as config.pbtxt's fields). */
export interface CanaryDeclarationJson {
  stable_version: string;
  canary_version: string;
  canary_weight: number;
  stickiness?: StickinessSource;
  rollback?: {
    window_seconds?: number;
    min_requests?: number;
    max_error_rate_increase?: number;
    max_p99_ratio?: number;
  };
}

export class CanaryDeclarationError extends Error {}

const TOP_FIELDS = ['stable_version', 'canary_version', 'canary_weight', 'stickiness', 'rollback'];
const ROLLBACK_FIELDS = ['window_seconds', 'min_requests', 'max_error_rate_increase', 'max_p99_ratio'];

/** Parses and validates canary.json; every error names the field (and the file as `where`). */
export function parseCanaryDeclaration(text: string, where = CANARY_FILE): CanaryDeclaration {
  const fail = (message: string): never => {
    throw new CanaryDeclarationError(`${where}: ${message}`);
  };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    return fail(`not valid JSON (${(error as Error).message})`);
  }
  const top = objectOf(raw, 'the declaration', fail);
  unknownFields(top, TOP_FIELDS, '', fail);
  const stableVersion = versionOf(top['stable_version'], 'stable_version', fail);
  const canaryVersion = versionOf(top['canary_version'], 'canary_version', fail);
  if (stableVersion === canaryVersion) fail(`canary_version must differ from stable_version (both are ${stableVersion})`);
  const canaryWeight = numberOf(top['canary_weight'], 'canary_weight', 0, 100, fail);
  const stickiness = top['stickiness'] ?? 'header';
  if (stickiness !== 'header' && stickiness !== 'parameter' && stickiness !== 'none') {
    fail(`stickiness must be "header", "parameter" or "none", not ${JSON.stringify(stickiness)}`);
  }
  const r = top['rollback'] === undefined ? {} : objectOf(top['rollback'], 'rollback', fail);
  unknownFields(r, ROLLBACK_FIELDS, 'rollback.', fail);
  const optional = (field: string, min: number, max: number, fallback: number, integer = false): number => {
    if (r[field] === undefined) return fallback;
    const value = numberOf(r[field], `rollback.${field}`, min, max, fail);
    if (integer && !Number.isInteger(value)) fail(`rollback.${field} must be a whole number, not ${value}`);
    return value;
  };
  const rollback: CanaryRollbackThresholds = {
    windowSeconds: optional('window_seconds', 0.1, 86_400, DEFAULT_ROLLBACK.windowSeconds),
    minRequests: optional('min_requests', 1, 1e9, DEFAULT_ROLLBACK.minRequests, true),
    maxErrorRateIncrease: optional('max_error_rate_increase', 0, 1, DEFAULT_ROLLBACK.maxErrorRateIncrease),
    maxP99Ratio: optional('max_p99_ratio', 1, 1e6, DEFAULT_ROLLBACK.maxP99Ratio),
  };
  return { stableVersion, canaryVersion, canaryWeight, stickiness: stickiness as StickinessSource, rollback };
}

/** The declaration as canary.json text (what `models canary` writes). */
export function printCanaryDeclaration(declaration: CanaryDeclaration): string {
  const json: CanaryDeclarationJson = {
    stable_version: declaration.stableVersion,
    canary_version: declaration.canaryVersion,
    canary_weight: declaration.canaryWeight,
    stickiness: declaration.stickiness,
    rollback: {
      window_seconds: declaration.rollback.windowSeconds,
      min_requests: declaration.rollback.minRequests,
      max_error_rate_increase: declaration.rollback.maxErrorRateIncrease,
      max_p99_ratio: declaration.rollback.maxP99Ratio,
    },
  };
  return `${JSON.stringify(json, null, 2)}\n`;
}

/** A model folder's declaration: its text and what it says, or undefined without one; throws when it is invalid. */
export async function readCanaryDeclaration(modelDir: string): Promise<{ text: string; declaration: CanaryDeclaration } | undefined> {
  const path = join(modelDir, CANARY_FILE);
  const text = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  if (text === undefined) return undefined;
  return { text, declaration: parseCanaryDeclaration(text, path) };
}

/** The versions a valid declaration in `modelDir` asks to load, or none. */
export async function declaredCanaryVersions(modelDir: string): Promise<number[]> {
  const found = await readCanaryDeclaration(modelDir).catch(() => undefined);
  if (!found) return [];
  return [Number(found.declaration.stableVersion), Number(found.declaration.canaryVersion)];
}

type Fail = (message: string) => never;

function objectOf(value: unknown, what: string, fail: Fail): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail(`${what} must be a JSON object`);
  return value as Record<string, unknown>;
}

function unknownFields(object: Record<string, unknown>, known: readonly string[], prefix: string, fail: Fail): void {
  for (const key of Object.keys(object)) {
    if (!known.includes(key)) fail(`unknown field '${prefix}${key}' (known: ${known.join(', ')})`);
  }
}

function versionOf(value: unknown, field: string, fail: Fail): string {
  const text = typeof value === 'number' ? String(value) : value;
  if (typeof text !== 'string' || !isVersionName(text))
    return fail(`${field} must be a version number such as "2", not ${JSON.stringify(value)}`);
  return String(Number(text));
}

function numberOf(value: unknown, field: string, min: number, max: number, fail: Fail): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) return fail(`${field} must be a number, not ${JSON.stringify(value)}`);
  if (value < min || value > max) return fail(`${field} must be between ${min} and ${max}, not ${value}`);
  return value;
}
