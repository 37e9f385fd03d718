import { describe, expect, it } from 'vitest';
import { parseLabels, softmax, topK } from './top-k.ts';

describe('softmax and top-k', () => {
  it('softmax sums to 1 and survives large logits', () => {
    const p = softmax([1000, 1000 + Math.log(3)]);
    expect(p[0]).toBeCloseTo(0.25, 6);
    expect(p[1]).toBeCloseTo(0.75, 6);
  });

  it('top-k is highest first, ties by index', () => {
    expect(topK([0.1, 0.5, 0.2, 0.5], 3)).toEqual([
      { index: 1, score: 0.5 },
      { index: 3, score: 0.5 },
      { index: 2, score: 0.2 },
    ]);
  });

  it('labels: one per line, trailing blank lines and CRs dropped', () => {
    expect(parseLabels('cat\r\ndog\n\n')).toEqual(['cat', 'dog']);
  });
});
