import { MODEL_FILTER_FLAG } from '../../packages/server/src/models/model-filter.ts';

/**
 * Model groups (issue 37): the models of one repository split across ECS services, each with its own
 * instances, target groups, autoscaling, alarms and dashboard, the load balancer routing each model's
 * requests to its group. What a group is, how the context names it, and the routes it needs within the
 * ALB's limits; infra/docs/model-groups.md says how to use them.
 */
export interface ModelGroup {
  /** Lowercase name: the group's construct, EMF `ServiceName` `batchwise-<env>-<name>`, dashboard. */
  readonly name: string;
  /**
   * The models it serves: names, and prefixes ending in `*`; `*` alone (the default group only) serves
   * every model no other group names. Passed to its tasks as `--model-filter`.
   */
  readonly models: readonly string[];
  /** Requests no route sends elsewhere come here: gRPC without the header, other HTTP paths. @default the first group */
  readonly default?: boolean;
  /** @default - the stack's instanceType */
  readonly instanceType?: string;
  /** @default - the stack's minCapacity */
  readonly minCapacity?: number;
  /** @default - the stack's maxCapacity */
  readonly maxCapacity?: number;
  /** @default - the stack's modelMemoryLimitMiB */
  readonly modelMemoryLimitMiB?: number;
  /** @default - the stack's loadOnDemand */
  readonly loadOnDemand?: boolean;
  /** @default - the stack's targetPendingRequestsPerTask */
  readonly targetPendingRequestsPerTask?: number;
}

/** The keys a group may have, and what each must be. */
const GROUP_KEYS = {
  name: 'a lowercase name of up to 20 characters',
  models: 'a list of model names and prefixes ending in *',
  default: 'true or false',
  instanceType: 'an EC2 instance type like g4dn.xlarge',
  minCapacity: 'an integer >= 1',
  maxCapacity: 'an integer >= 1',
  modelMemoryLimitMiB: 'an integer > 0',
  loadOnDemand: 'true or false',
  targetPendingRequestsPerTask: 'an integer > 0',
} as const;

/** The request header gRPC clients name the model in, for the load balancer to route by (HTTP routes by path). */
export const MODEL_ROUTING_HEADER = 'batchwise-model';

/** The ALB's limits the routes must fit (docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-limits.html). */
export const ALB_LIMITS = {
  /** "Rules per Application Load Balancer (excluding default rules)", over all its listeners: a default quota, raised on request. */
  rulesPerLoadBalancer: 100,
  /** "Condition values per rule" (not adjustable). */
  conditionValuesPerRule: 5,
  /** "Condition wildcards per rule" (not adjustable). */
  wildcardsPerRule: 5,
  /** "Target Groups per Application Load Balancer" (not adjustable): each group has two. */
  targetGroupsPerLoadBalancer: 100,
  /** Longest path pattern or header value. */
  conditionValueChars: 128,
} as const;

/** The priority of a listener's first route; the plain-HTTP listener's refusals take 1 and 2. */
export const FIRST_ROUTE_PRIORITY = 10;

const GROUP_NAME = /^[a-z][a-z0-9-]{0,19}$/;
/** A model name or a prefix followed by `*`: characters an ALB path pattern and a header value both accept. */
const MODEL_ENTRY = /^[A-Za-z0-9_.-]+\*?$/;
const INSTANCE_TYPE = /^[a-z][a-z0-9]*\.[a-z0-9]+$/;

/**
 * The groups of the context value (a JSON list: from an environment file as it is, from `-c` as a
 * string), checked. Throws an Error naming the group and the field.
 */
export function parseModelGroups(value: unknown): ModelGroup[] {
  let list = value;
  if (typeof list === 'string') {
    try {
      list = JSON.parse(list);
    } catch (error) {
      throw new Error(`not valid JSON (${(error as Error).message}).`);
    }
  }
  if (!Array.isArray(list) || list.length === 0) {
    throw new Error('expected a non-empty list of groups: [{"name": "vision", "models": ["resnet50", "yolo-*"]}, ...].');
  }
  const groups = list.map((entry, i) => parseGroup(entry, i));
  checkGroups(groups);
  return groups;
}

function parseGroup(entry: unknown, index: number): ModelGroup {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw new Error(`group ${index + 1}: expected an object with "name" and "models", got ${JSON.stringify(entry)}.`);
  }
  const fields = entry as Record<string, unknown>;
  const name = fields['name'];
  if (typeof name !== 'string' || !GROUP_NAME.test(name)) {
    throw new Error(`group ${index + 1}: "name" must be ${GROUP_KEYS.name}, got ${JSON.stringify(name)}.`);
  }
  const where = `group '${name}'`;
  for (const key of Object.keys(fields)) {
    if (!(key in GROUP_KEYS)) throw new Error(`${where}: unknown key '${key}'. Known keys: ${Object.keys(GROUP_KEYS).join(', ')}.`);
  }
  const bad = (key: keyof typeof GROUP_KEYS) =>
    new Error(`${where}: "${key}" must be ${GROUP_KEYS[key]}, got ${JSON.stringify(fields[key])}.`);
  const models = fields['models'];
  if (!Array.isArray(models) || models.length === 0 || !models.every((m) => typeof m === 'string' && (m === '*' || MODEL_ENTRY.test(m)))) {
    throw bad('models');
  }
  const seen = new Set<string>();
  for (const model of models as string[]) {
    if (seen.has(model)) throw new Error(`${where}: "models" names '${model}' twice.`);
    seen.add(model);
  }
  const int = (key: 'minCapacity' | 'maxCapacity' | 'modelMemoryLimitMiB' | 'targetPendingRequestsPerTask', min: number) => {
    const v = fields[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw bad(key);
    return v;
  };
  const bool = (key: 'default' | 'loadOnDemand') => {
    const v = fields[key];
    if (v !== undefined && typeof v !== 'boolean') throw bad(key);
    return v as boolean | undefined;
  };
  const instanceType = fields['instanceType'];
  if (instanceType !== undefined && (typeof instanceType !== 'string' || !INSTANCE_TYPE.test(instanceType))) throw bad('instanceType');
  const group: ModelGroup = {
    name,
    models: models as string[],
    default: bool('default'),
    instanceType: instanceType as string | undefined,
    minCapacity: int('minCapacity', 1),
    maxCapacity: int('maxCapacity', 1),
    modelMemoryLimitMiB: int('modelMemoryLimitMiB', 1),
    loadOnDemand: bool('loadOnDemand'),
    targetPendingRequestsPerTask: int('targetPendingRequestsPerTask', 1),
  };
  if (group.minCapacity !== undefined && group.maxCapacity !== undefined && group.minCapacity > group.maxCapacity) {
    throw new Error(`${where}: minCapacity (${group.minCapacity}) must not exceed maxCapacity (${group.maxCapacity}).`);
  }
  return group;
}

/** Whether two entries can name the same model. */
function overlap(a: string, b: string): boolean {
  const prefix = (e: string) => (e.endsWith('*') ? e.slice(0, -1) : undefined);
  const pa = prefix(a);
  const pb = prefix(b);
  if (pa === undefined && pb === undefined) return a === b;
  if (pa !== undefined && pb !== undefined) return pa.startsWith(pb) || pb.startsWith(pa);
  return pa !== undefined ? b.startsWith(pa) : a.startsWith(pb!);
}

function checkGroups(groups: readonly ModelGroup[]): void {
  const names = new Set<string>();
  for (const group of groups) {
    if (names.has(group.name)) throw new Error(`two groups are named '${group.name}'.`);
    names.add(group.name);
  }
  const defaults = groups.filter((g) => g.default === true);
  if (defaults.length > 1) throw new Error(`only one group may be the default, got ${defaults.map((g) => `'${g.name}'`).join(' and ')}.`);
  const fallback = defaultGroupOf(groups);
  for (const group of groups) {
    if (group !== fallback && group.models.includes('*')) {
      throw new Error(
        `group '${group.name}': "models" may be "*" (every model no other group names) only in the default group, '${fallback.name}'.`,
      );
    }
  }
  // A model two groups name would be loaded by both; the ALB would send it to the first rule's.
  for (let i = 0; i < groups.length; i++) {
    for (let j = i + 1; j < groups.length; j++) {
      for (const a of groups[i]!.models) {
        for (const b of groups[j]!.models) {
          if (a === '*' || b === '*' || !overlap(a, b)) continue;
          throw new Error(
            `'${a}' of group '${groups[i]!.name}' and '${b}' of group '${groups[j]!.name}' can name the same model: ` +
              'each model belongs to one group.',
          );
        }
      }
    }
  }
}

/** The group that takes requests no route sends elsewhere: the one marked default, else the first. */
export function defaultGroupOf<T extends Pick<ModelGroup, 'default'>>(groups: readonly T[]): T {
  return groups.find((g) => g.default === true) ?? groups[0]!;
}

/** The `serve` flags that keep a group's tasks to its models; none for a default group of `*`. */
export function modelFilterFlags(group: Pick<ModelGroup, 'models'>): string[] {
  return group.models.includes('*') ? [] : [MODEL_FILTER_FLAG, group.models.join(',')];
}

/** One listener rule: the values of its one condition, sent to `group`'s target group. */
export interface RouteRule {
  readonly group: string;
  readonly priority: number;
  readonly values: readonly string[];
}

/** The listener rules the groups need: by path on :8000, by MODEL_ROUTING_HEADER on :8001. */
export interface RoutePlan {
  readonly http: readonly RouteRule[];
  readonly grpc: readonly RouteRule[];
}

/** A model's paths: its own (metadata) and everything under it; a prefix's, one pattern. */
function pathValues(entry: string): string[] {
  return entry.endsWith('*') ? [`/v2/models/${entry}`] : [`/v2/models/${entry}`, `/v2/models/${entry}/*`];
}

const wildcards = (value: string) => [...value].filter((c) => c === '*' || c === '?').length;

/**
 * Packs each non-default group's condition values into as few rules as the per-rule limits allow,
 * keeping a model's values in one rule; priorities from FIRST_ROUTE_PRIORITY, in group order.
 */
function pack(groups: readonly ModelGroup[], valuesOf: (entry: string) => string[]): RouteRule[] {
  const rules: RouteRule[] = [];
  for (const group of groups) {
    let values: string[] = [];
    const flush = () => {
      if (values.length > 0) rules.push({ group: group.name, priority: FIRST_ROUTE_PRIORITY + rules.length, values });
      values = [];
    };
    for (const entry of group.models) {
      const next = valuesOf(entry);
      const fits = (vs: string[]) =>
        vs.length <= ALB_LIMITS.conditionValuesPerRule && vs.reduce((n, v) => n + wildcards(v), 0) <= ALB_LIMITS.wildcardsPerRule;
      if (!fits([...values, ...next])) flush();
      values.push(...next);
    }
    flush();
  }
  return rules;
}

/**
 * The routes of the groups, checked against the ALB's limits: throws, saying what is over and what to
 * do, when a value is too long, when the rules exceed the load balancer's quota (with `reservedRules`
 * the stack's own, e.g. the plain-HTTP refusals) or the target groups its limit. The default group
 * needs no rule: the listeners' default actions send it what no rule matches.
 */
export function planRoutes(
  groups: readonly ModelGroup[],
  reservedRules: number,
  ruleQuota: number = ALB_LIMITS.rulesPerLoadBalancer,
): RoutePlan {
  const routed = groups.filter((g) => g !== defaultGroupOf(groups));
  for (const group of routed) {
    for (const entry of group.models) {
      const longest = [...pathValues(entry), entry].reduce((a, b) => (a.length >= b.length ? a : b));
      if (longest.length > ALB_LIMITS.conditionValueChars) {
        throw new Error(
          `group '${group.name}': model '${entry}' makes the condition value '${longest}' of ${longest.length} characters; ` +
            `an ALB takes at most ${ALB_LIMITS.conditionValueChars}.`,
        );
      }
    }
  }
  const plan = { http: pack(routed, pathValues), grpc: pack(routed, (entry) => [entry]) };
  const rules = plan.http.length + plan.grpc.length + reservedRules;
  if (rules > ruleQuota) {
    throw new Error(
      `the groups need ${rules} listener rules (${plan.http.length} by path on :8000, ${plan.grpc.length} by header on :8001` +
        (reservedRules > 0 ? `, ${reservedRules} of the stack's own` : '') +
        `), more than the ${ruleQuota} an Application Load Balancer allows (quota "Rules per Application Load Balancer", ` +
        `context albRuleQuota; a rule holds ${ALB_LIMITS.conditionValuesPerRule} condition values: an exact model name takes 2 on :8000 ` +
        'and 1 on :8001, a prefix 1 on each). Name models by prefixes (one value covers every model it starts), ' +
        "move models into the default group (it needs no rules), or split the groups across stacks: infra/docs/model-groups.md, 'Past the limits'.",
    );
  }
  const targetGroups = 2 * groups.length;
  if (targetGroups > ALB_LIMITS.targetGroupsPerLoadBalancer) {
    throw new Error(
      `${groups.length} groups need ${targetGroups} target groups (one on :8000 and one on :8001 each), more than the ` +
        `${ALB_LIMITS.targetGroupsPerLoadBalancer} an Application Load Balancer allows: split the groups across stacks.`,
    );
  }
  return plan;
}
