import { Errors } from '../errors/errors.ts';

/** Request JSON as Triton reads it (exact 64-bit integers, NaN and Infinity): @batchwise/protocol's reader. */
export { parseJsonLosslessly, parseTritonJson as parseRequestJson } from '@batchwise/protocol';

/** Triton's limit on the nesting of request JSON (triton_json.h), in levels of objects and arrays. */
export const MAX_JSON_NESTING_DEPTH = 100;

/** Triton's words for JSON nested deeper than the limit; `detail` says where. */
export function jsonNestingError(detail: string): Error {
  return Errors.invalidArg(`JSON nesting depth exceeds maximum allowed limit (${MAX_JSON_NESTING_DEPTH}): ${detail}`);
}

/**
 * Refuses a parsed JSON value nested deeper than Triton allows (the value itself, when an object
 * or array, is level 1). Iterative, and it stops at the first level past the limit.
 */
export function checkJsonNesting(value: unknown): void {
  const stack: { values: unknown[]; depth: number }[] = [{ values: [value], depth: 0 }];
  while (stack.length > 0) {
    const top = stack.pop()!;
    for (const v of top.values) {
      if (typeof v !== 'object' || v === null) continue;
      if (top.depth + 1 > MAX_JSON_NESTING_DEPTH)
        throw jsonNestingError(`the request is nested more than ${MAX_JSON_NESTING_DEPTH} levels deep`);
      stack.push({ values: Array.isArray(v) ? v : Object.values(v as object), depth: top.depth + 1 });
    }
  }
}
