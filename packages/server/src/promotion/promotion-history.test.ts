import { describe, expect, it } from 'vitest';
import {
  HISTORY_PREFIX,
  readConfigWithHistory,
  rollbackTarget,
  servingVersions,
  writeConfigWithHistory,
  type PromotionRecord,
} from './promotion-history.ts';

const CONFIG = `# owned by the vision team
name: "resnet"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]
`;
const at = '2026-01-01T00:00:00.000Z';
const promote = (version: number, from: number | null): PromotionRecord => ({ action: 'promote', version, from, at, actor: 'ci' });
const rollback = (version: number, from: number | null): PromotionRecord => ({ action: 'rollback', version, from, at, actor: 'ci' });

describe('promotion history in config.pbtxt', () => {
  it('writes the pointer as version_policy specific and the history as comment lines, and reads them back', () => {
    const parsed = readConfigWithHistory(CONFIG);
    expect(parsed.history).toEqual([]);
    expect(parsed.headerComments).toEqual(['# owned by the vision team']);
    const text = writeConfigWithHistory(parsed, 3, [promote(3, 2)]);
    expect(text.split('\n')[0]).toBe(`${HISTORY_PREFIX}${JSON.stringify(promote(3, 2))}`);
    expect(text).toContain('# owned by the vision team');
    const back = readConfigWithHistory(text);
    expect(back.config.version_policy).toEqual({ specific: { versions: [3] } });
    expect(back.history).toEqual([promote(3, 2)]);
    expect({ ...back.config, version_policy: undefined }).toEqual({ ...parsed.config, version_policy: undefined });
    const again = readConfigWithHistory(writeConfigWithHistory(back, 2, [...back.history, rollback(2, 3)]));
    expect(again.history).toHaveLength(2);
    expect(again.headerComments).toEqual(['# owned by the vision team']);
    expect(servingVersions(again.config, [1, 2, 3])).toEqual([2]);
  });

  it('refuses a damaged history line', () => {
    expect(() => readConfigWithHistory(`${HISTORY_PREFIX}{oops\n${CONFIG}`)).toThrow(/line 1: promotion history line is not valid JSON/);
  });

  it('rolls back through earlier promotions, not back and forth', () => {
    const history = [promote(2, 1), promote(3, 2), promote(4, 3)];
    expect(rollbackTarget(history, 4)).toBe(3);
    expect(rollbackTarget([...history, rollback(3, 4)], 3)).toBe(2);
    expect(rollbackTarget([...history, rollback(3, 4), rollback(2, 3)], 2)).toBe(1);
    expect(rollbackTarget([...history, rollback(3, 4), rollback(2, 3), rollback(1, 2)], 1)).toBeUndefined();
    // A promotion after a rollback goes on from where it is.
    expect(rollbackTarget([...history, rollback(3, 4), promote(5, 3)], 5)).toBe(3);
    // The config serves something the history does not explain (edited by hand): no guess.
    expect(rollbackTarget(history, 2)).toBeUndefined();
    expect(rollbackTarget([], 1)).toBeUndefined();
    expect(rollbackTarget([promote(1, null)], 1)).toBeUndefined();
  });
});
