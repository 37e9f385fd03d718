/** FP32 on a GPU differs from the CPU in summation order and fused multiply-adds: |gpu - cpu| <= ATOL + RTOL * |cpu|. */
export const RTOL = 1e-3;
export const ATOL = 1e-4;

/** The largest differences of `actual` from `expected`, and whether every element is within the tolerance. */
export function compareWithin(
  actual: Float32Array,
  expected: Float32Array,
): { within: boolean; maxAbs: number; maxRel: number; worst: number } {
  if (actual.length !== expected.length) throw new Error(`${actual.length} values answered, ${expected.length} expected`);
  let maxAbs = 0;
  let maxRel = 0;
  let worst = 0;
  for (let i = 0; i < actual.length; i++) {
    const diff = Math.abs(actual[i]! - expected[i]!);
    maxAbs = Math.max(maxAbs, diff);
    if (expected[i] !== 0) maxRel = Math.max(maxRel, diff / Math.abs(expected[i]!));
    worst = Math.max(worst, diff / (ATOL + RTOL * Math.abs(expected[i]!)));
  }
  return { within: worst <= 1, maxAbs, maxRel, worst };
}
