import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Node } from 'constructs';
import type { BatchwiseStackProps } from './batchwise-stack.ts';
import { SERVER_IMAGE_TARGETS } from './server-image.ts';
import { DEFAULT_TRACE_RATE } from './tracing.ts';
import { parseModelGroups } from './model-groups.ts';
import type { ModelGroup } from './model-groups.ts';

/**
 * Context keys the stack reads (`cdk synth -c key=value`, infra/environments/<envName>.json, or cdk.json "context").
 * Values from the command line arrive as strings; cdk.json may hold numbers.
 */
export const CONTEXT_KEYS = [
  'envName',
  'certificateArn',
  'instanceType',
  'memoryLimitMiB',
  'memoryReservationMiB',
  'gpuMemoryMiB',
  'minCapacity',
  'maxCapacity',
  'modelBucketName',
  'modelPrefix',
  'imageUri',
  'serverImage',
  'alarmEmail',
  'amiVariant',
  'amiId',
  'httpListenerProtocol',
  'allowedIngressCidr',
  'wafRateLimitPer5Minutes',
  'metricsScraperCidr',
  'metricsScraperSecurityGroupId',
  'githubRepo',
  'githubBranch',
  'githubOidcProviderArn',
  'githubOidcRefInSubject',
  'natGateways',
  'healthCheckGracePeriodSeconds',
  'targetPendingRequestsPerTask',
  'latencyP99AlarmMs',
  'enableExecuteCommand',
  'tracing',
  'traceRate',
  'otelCollectorConfig',
  'loadOnDemand',
  'modelMemoryLimitMiB',
  'modelGpuMemoryLimitMiB',
  'modelCacheDiskGiB',
  'evictionsPerTaskPerMinute',
  'modelGroups',
  'albRuleQuota',
] as const;

export type ContextKey = (typeof CONTEXT_KEYS)[number];

/** Keys the stack no longer reads, with what to do instead: refused like unknown keys, but saying why. */
const RETIRED_KEYS: Readonly<Record<string, string>> = {
  desiredCount:
    'the service no longer carries a desired count: CloudFormation re-sent it on every deploy and reset the task count ' +
    'that autoscaling had chosen. Autoscaling owns it within minCapacity..maxCapacity; set minCapacity instead',
};

/**
 * A setting that cannot be used as given (a context value, an environment file): bin/app.ts
 * prints its message as one line and exits non-zero, without a stack trace, since it is the
 * user's input and not a crash.
 */
export class ConfigurationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigurationError';
  }
}

class ContextError extends ConfigurationError {
  constructor(key: ContextKey, message: string) {
    super(`Context '${key}': ${message}`);
    this.name = 'ContextError';
  }
}

function str(node: Node, key: ContextKey): string | undefined {
  const value: unknown = node.tryGetContext(key);
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new ContextError(key, `expected a string, got ${JSON.stringify(value)}.`);
  return value.trim();
}

function int(node: Node, key: ContextKey): number | undefined {
  const value: unknown = node.tryGetContext(key);
  if (value === undefined || value === null || value === '') return undefined;
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n)) throw new ContextError(key, `expected an integer, got ${JSON.stringify(value)}.`);
  return n;
}

function oneOf<T extends string>(node: Node, key: ContextKey, allowed: readonly T[]): T | undefined {
  const value = str(node, key);
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) {
    throw new ContextError(key, `expected one of ${allowed.join(', ')}, got '${value}'.`);
  }
  return value as T;
}

function bool(node: Node, key: ContextKey): boolean | undefined {
  const value: unknown = node.tryGetContext(key);
  if (value === undefined || value === null || value === '') return undefined;
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw new ContextError(key, `expected true or false, got ${JSON.stringify(value)}.`);
}

function matching(node: Node, key: ContextKey, pattern: RegExp, what: string): string | undefined {
  const value = str(node, key);
  if (value !== undefined && !pattern.test(value)) throw new ContextError(key, `'${value}' is not ${what}.`);
  return value;
}

const ENV_NAME = /^[a-z][a-z0-9-]{0,19}$/;
const CIDR = /^(\d{1,3}\.){3}\d{1,3}\/\d{1,2}$/;

/** Context keys of our shape (plain lowerCamelCase), as opposed to CDK's `@aws-cdk/...`, `aws:cdk:...` or lookups. */
const OUR_SHAPE = /^[a-z][A-Za-z0-9]*$/;

function unknownKeyError(key: string, where: string): ConfigurationError {
  const retired = RETIRED_KEYS[key];
  if (retired !== undefined) return new ConfigurationError(`Context key '${key}' ${where} is no longer read: ${retired}.`);
  const suggestion = CONTEXT_KEYS.find((k) => k.toLowerCase() === key.toLowerCase()) ?? CONTEXT_KEYS.find((k) => editDistance(k, key) <= 2);
  return new ConfigurationError(
    `Unknown context key '${key}' ${where}${suggestion ? ` (did you mean '${suggestion}'?)` : ''}. ` +
      `Known keys: ${CONTEXT_KEYS.join(', ')}.`,
  );
}

function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length]!;
}

/**
 * Where an environment's lasting settings live: `infra/environments/<envName>.json`, a JSON
 * object of context keys, committed, read by every deploy (manual or CI) of that environment.
 */
export const ENVIRONMENTS_DIR = new URL('../environments/', import.meta.url);

/**
 * Applies `<dir>/<envName>.json` (envName from the context, default `dev`) as context values
 * under those already set: `-c key=value` still wins for one-off synths. Every key in the
 * file must be a known context key. Returns the file read, or undefined when there is none.
 */
export function applyEnvironmentFile(node: Node, dir: URL | string = ENVIRONMENTS_DIR): string | undefined {
  const envName = node.tryGetContext('envName') ?? 'dev';
  if (typeof envName !== 'string' || !ENV_NAME.test(envName)) return undefined; // validated later
  const file = join(dir instanceof URL ? fileURLToPath(dir) : dir, `${envName}.json`);
  if (!existsSync(file)) return undefined;
  let settings: unknown;
  try {
    settings = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigurationError(`${file}: not valid JSON (${(error as Error).message}).`);
  }
  if (typeof settings !== 'object' || settings === null || Array.isArray(settings)) {
    throw new ConfigurationError(`${file}: expected a JSON object of context keys and values.`);
  }
  for (const [key, value] of Object.entries(settings)) {
    if (!(CONTEXT_KEYS as readonly string[]).includes(key)) throw unknownKeyError(key, `in ${file}`);
    if (key === 'envName' && value !== envName)
      throw new ConfigurationError(`${file}: envName is '${String(value)}', expected '${envName}'.`);
    if (node.tryGetContext(key) === undefined) node.setContext(key, value);
  }
  return file;
}

/**
 * Reads and validates the stack's context. Throws naming the key on a missing required
 * value, a malformed value or an inconsistent combination.
 */
export function stackPropsFromContext(node: Node): BatchwiseStackProps {
  // A mistyped key (`-c alarmEmial=...`) would otherwise be ignored, and the deploy would
  // silently drop what it was meant to set.
  for (const key of Object.keys(node.getAllContext())) {
    if (OUR_SHAPE.test(key) && !(CONTEXT_KEYS as readonly string[]).includes(key)) throw unknownKeyError(key, 'in the context');
  }
  const certificateArn = matching(
    node,
    'certificateArn',
    /^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate\/[A-Za-z0-9-]+$/,
    'an ACM certificate ARN',
  );
  if (certificateArn === undefined) {
    // Where bin/app.ts reads lasting settings from (applyEnvironmentFile), not cdk.json.
    const envName: unknown = node.tryGetContext('envName') ?? 'dev';
    const file = typeof envName === 'string' && ENV_NAME.test(envName) ? envName : '<envName>';
    throw new ContextError(
      'certificateArn',
      'required: the ALB serves gRPC on :8001 over HTTPS and needs an ACM certificate. Pass it with ' +
        '`-c certificateArn=arn:aws:acm:<region>:<account>:certificate/<id>` or set "certificateArn" in ' +
        `infra/environments/${file}.json.`,
    );
  }
  const envName = matching(node, 'envName', ENV_NAME, 'a lowercase name of up to 20 characters');
  const allowedIngressCidr = matching(node, 'allowedIngressCidr', CIDR, 'an IPv4 CIDR');
  if (allowedIngressCidr === undefined) {
    throw new ContextError(
      'allowedIngressCidr',
      "required: who may reach the inference ports :8000 and :8001 through the load balancer. Set the clients' " +
        'network (e.g. 203.0.113.0/24), or 0.0.0.0/0 to make the endpoint public on purpose (the WAF rate limit ' +
        'then bounds what one address can send). There is no default, so the stack is never public by accident.',
    );
  }

  const minCapacity = int(node, 'minCapacity');
  const maxCapacity = int(node, 'maxCapacity');
  const min = minCapacity ?? 1;
  const max = maxCapacity ?? Math.max(4, min);
  if (min < 1) throw new ContextError('minCapacity', `must be >= 1, got ${min}.`);
  if (min > max) throw new ContextError('minCapacity', `(${min}) must not exceed maxCapacity (${max}).`);

  const memoryLimitMiB = int(node, 'memoryLimitMiB');
  const memoryReservationMiB = int(node, 'memoryReservationMiB');
  if (memoryReservationMiB !== undefined && memoryLimitMiB !== undefined && memoryReservationMiB > memoryLimitMiB) {
    throw new ContextError('memoryReservationMiB', `(${memoryReservationMiB}) must not exceed memoryLimitMiB (${memoryLimitMiB}).`);
  }
  const grace = int(node, 'healthCheckGracePeriodSeconds');
  if (grace !== undefined && (grace < 0 || grace > 2_147_483_647)) {
    throw new ContextError('healthCheckGracePeriodSeconds', `must be >= 0, got ${grace}.`);
  }
  const latency = int(node, 'latencyP99AlarmMs');
  if (latency !== undefined && latency <= 0) throw new ContextError('latencyP99AlarmMs', `must be > 0, got ${latency}.`);
  const wafRateLimit = int(node, 'wafRateLimitPer5Minutes');
  if (wafRateLimit !== undefined && (wafRateLimit < 10 || wafRateLimit > 2_000_000_000)) {
    throw new ContextError('wafRateLimitPer5Minutes', `must lie within 10..2000000000 (AWS WAF's range), got ${wafRateLimit}.`);
  }
  const target = int(node, 'targetPendingRequestsPerTask');
  if (target !== undefined && target <= 0) {
    throw new ContextError('targetPendingRequestsPerTask', `must be > 0, got ${target}.`);
  }
  const tracing = oneOf(node, 'tracing', ['off', 'xray'] as const);
  const traceRate = int(node, 'traceRate');
  const otelCollectorConfig = matching(
    node,
    'otelCollectorConfig',
    /^(\/[A-Za-z0-9_.-]+)+$|^[A-Za-z0-9_.-]+$/,
    'an SSM parameter name (`name`, or a path `/a/b/name`)',
  );
  if (traceRate !== undefined && traceRate < 1) {
    throw new ContextError('traceRate', `must be >= 1 (one request in traceRate is traced), got ${traceRate}.`);
  }
  const sidecarOnly = 'only applies with tracing=xray (the collector sidecar): set tracing=xray too, or drop it.';
  if (tracing !== 'xray' && traceRate !== undefined) throw new ContextError('traceRate', sidecarOnly);
  if (tracing !== 'xray' && otelCollectorConfig !== undefined) throw new ContextError('otelCollectorConfig', sidecarOnly);
  // Many models per host (many-models.ts): positive sizes; the eviction alarm only where models are evicted.
  const loadOnDemand = bool(node, 'loadOnDemand');
  const manyModels = {
    modelMemoryLimitMiB: int(node, 'modelMemoryLimitMiB'),
    modelGpuMemoryLimitMiB: int(node, 'modelGpuMemoryLimitMiB'),
    modelCacheDiskGiB: int(node, 'modelCacheDiskGiB'),
    evictionsPerTaskPerMinute: int(node, 'evictionsPerTaskPerMinute'),
  };
  for (const [key, value] of Object.entries(manyModels)) {
    if (value !== undefined && value <= 0) throw new ContextError(key as ContextKey, `must be > 0, got ${value}.`);
  }
  const modelGroups = groupsOf(node);
  const albRuleQuota = int(node, 'albRuleQuota');
  if (albRuleQuota !== undefined && albRuleQuota < 1) throw new ContextError('albRuleQuota', `must be >= 1, got ${albRuleQuota}.`);
  if (albRuleQuota !== undefined && modelGroups === undefined) {
    throw new ContextError(
      'albRuleQuota',
      'only applies with modelGroups (the routes of the groups are the rules it bounds): set it too, or drop it.',
    );
  }
  if (manyModels.evictionsPerTaskPerMinute !== undefined && loadOnDemand !== true && !modelGroups?.some((g) => g.loadOnDemand === true)) {
    throw new ContextError(
      'evictionsPerTaskPerMinute',
      'only applies with loadOnDemand=true (models are evicted only then), for the stack or a model group: set it too, or drop it.',
    );
  }

  return {
    certificateArn,
    envName,
    instanceType: matching(node, 'instanceType', /^[a-z][a-z0-9]*\.[a-z0-9]+$/, 'an EC2 instance type like g4dn.xlarge'),
    memoryLimitMiB,
    memoryReservationMiB,
    gpuMemoryMiB: int(node, 'gpuMemoryMiB'),
    minCapacity: min,
    maxCapacity: max,
    modelBucketName: matching(node, 'modelBucketName', /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'an S3 bucket name'),
    modelPrefix: str(node, 'modelPrefix'),
    imageUri: str(node, 'imageUri'),
    serverImage: oneOf(node, 'serverImage', SERVER_IMAGE_TARGETS),
    alarmEmail: matching(node, 'alarmEmail', /^[^@\s]+@[^@\s]+\.[^@\s]+$/, 'an e-mail address'),
    amiVariant: oneOf(node, 'amiVariant', ['al2023', 'al2'] as const),
    amiId: matching(node, 'amiId', /^ami-[0-9a-f]{8,17}$/, 'an AMI id (ami-0123456789abcdef0)'),
    httpListenerProtocol: oneOf(node, 'httpListenerProtocol', ['HTTP', 'HTTPS'] as const),
    allowedIngressCidr,
    wafRateLimitPer5Minutes: wafRateLimit,
    metricsScraperCidr: matching(node, 'metricsScraperCidr', CIDR, 'an IPv4 CIDR'),
    metricsScraperSecurityGroupId: matching(node, 'metricsScraperSecurityGroupId', /^sg-[0-9a-f]{8,17}$/, 'a security group id'),
    githubRepo: matching(node, 'githubRepo', /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/, "a GitHub repository 'owner/name'"),
    githubBranch: str(node, 'githubBranch'),
    githubOidcProviderArn: matching(
      node,
      'githubOidcProviderArn',
      /^arn:aws[a-z-]*:iam::\d{12}:oidc-provider\/.+$/,
      'an IAM OIDC provider ARN',
    ),
    githubOidcRefInSubject: bool(node, 'githubOidcRefInSubject'),
    natGateways: int(node, 'natGateways'),
    healthCheckGracePeriodSeconds: grace,
    targetPendingRequestsPerTask: target,
    latencyP99AlarmMs: latency,
    enableExecuteCommand: bool(node, 'enableExecuteCommand'),
    tracing: tracing === 'xray' ? { rate: traceRate ?? DEFAULT_TRACE_RATE, collectorConfigParameterName: otelCollectorConfig } : undefined,
    loadOnDemand,
    ...manyModels,
    modelGroups,
    albRuleQuota,
  };
}

/** `modelGroups`: a JSON list in an environment file, or its text with `-c` (model-groups.ts checks it). */
function groupsOf(node: Node): ModelGroup[] | undefined {
  const value: unknown = node.tryGetContext('modelGroups');
  if (value === undefined || value === null || value === '') return undefined;
  try {
    return parseModelGroups(value);
  } catch (error) {
    throw new ContextError('modelGroups', (error as Error).message);
  }
}
