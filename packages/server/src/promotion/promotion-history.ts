import { parseModelConfig, printModelConfig } from '../config/index.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { selectVersions } from '../repository/version-policy.ts';

/**
 * One change of a model's serving version, kept as a `# batchwise-promotion: {json}` comment
 * line at the top of its config.pbtxt. The pointer (version_policy) and its history live in
 * one object, so one PutObject (or one rename) changes both together; Triton and protobuf
 * text format ignore the comments.
 */
export interface PromotionRecord {
  readonly action: 'promote' | 'rollback';
  /** The version that serves after this change. */
  readonly version: number;
  /** The version that served before (null: none known, e.g. the policy was `latest`). */
  readonly from: number | null;
  /** ISO 8601 time of the change. */
  readonly at: string;
  /** Who made it (user, CI run). */
  readonly actor: string;
  readonly message?: string;
  /** For promotions: the artifact's SHA-256 and size. */
  readonly sha256?: string;
  readonly bytes?: number;
}

export const HISTORY_PREFIX = '# batchwise-promotion: ';
/** Oldest records beyond this many are dropped, so config.pbtxt stays small. */
export const MAX_HISTORY_RECORDS = 200;

export interface ConfigWithHistory {
  readonly history: PromotionRecord[];
  /** Comment lines at the top of the file that are not history, kept as they were. */
  readonly headerComments: string[];
  /** The config text without the history lines. */
  readonly body: string;
  readonly config: ModelConfig;
}

/** Splits config.pbtxt into its promotion history and the config itself. */
export function readConfigWithHistory(text: string, fileName = 'config.pbtxt'): ConfigWithHistory {
  const lines = text.split('\n');
  const history: PromotionRecord[] = [];
  const headerComments: string[] = [];
  let i = 0;
  for (; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith(HISTORY_PREFIX)) {
      const json = line.slice(HISTORY_PREFIX.length);
      let record: PromotionRecord;
      try {
        record = JSON.parse(json) as PromotionRecord;
      } catch {
        throw new Error(`${fileName} line ${i + 1}: promotion history line is not valid JSON: ${json.slice(0, 80)}`);
      }
      if (!Number.isSafeInteger(record?.version) || (record.action !== 'promote' && record.action !== 'rollback')) {
        throw new Error(`${fileName} line ${i + 1}: promotion history line has no valid action and version`);
      }
      history.push(record);
    } else if (line.trimStart().startsWith('#')) headerComments.push(line);
    else if (line.trim() !== '' || history.length === 0) break;
  }
  const body = lines.slice(i).join('\n');
  return { history, headerComments, body, config: parseModelConfig(body, fileName) };
}

/** config.pbtxt serving exactly `version` (version_policy specific), with `history` on top. */
export function writeConfigWithHistory(
  current: ConfigWithHistory,
  serve: number | readonly number[],
  history: readonly PromotionRecord[],
): string {
  const versions = typeof serve === 'number' ? [serve] : [...serve];
  const config: ModelConfig = { ...structuredClone(current.config), version_policy: { specific: { versions } } };
  const kept = history.slice(-MAX_HISTORY_RECORDS);
  const printed = printModelConfig(config);
  const text = [...kept.map((r) => `${HISTORY_PREFIX}${JSON.stringify(r)}`), ...current.headerComments, printed].join('\n');
  // What we write must read back as the same config: never put an unloadable config in place.
  const back = readConfigWithHistory(text);
  if (printModelConfig(back.config) !== printed || back.history.length !== kept.length) {
    throw new Error(`internal error: the rewritten config.pbtxt of '${config.name}' does not read back as written`);
  }
  return text;
}

/** The versions the config serves out of those present (Triton's version policy). */
export function servingVersions(config: ModelConfig, present: readonly number[]): number[] {
  return selectVersions(present, config.version_policy);
}

/**
 * The version a rollback returns to: replays the history as a stack (a promotion pushes, a
 * rollback pops), so repeated rollbacks walk back through earlier promotions instead of
 * flipping between two versions. Undefined when there is nothing to return to.
 */
export function rollbackTarget(history: readonly PromotionRecord[], serving: number | undefined): number | undefined {
  const stack: number[] = [];
  for (const r of history) {
    if (r.action === 'promote') {
      if (stack.length === 0 && r.from !== null) stack.push(r.from);
      if (stack.at(-1) !== r.version) stack.push(r.version);
    } else {
      while (stack.length > 0 && stack.at(-1) !== r.version) stack.pop();
      if (stack.length === 0) stack.push(r.version);
    }
  }
  if (serving === undefined || stack.at(-1) !== serving) return undefined;
  return stack.at(-2);
}
