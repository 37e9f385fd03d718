/** Integer ranges of protobuf scalar types, as far as JS numbers carry them exactly. */
export const INTEGER_RANGE: Readonly<Record<string, readonly [bigint, bigint]>> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  sint32: [-(2n ** 31n), 2n ** 31n - 1n],
  sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
};

export const isIntegerType = (type: string): boolean => type in INTEGER_RANGE;
export const isFloatType = (type: string): boolean => type === 'float' || type === 'double';
export const isStringType = (type: string): boolean => type === 'string' || type === 'bytes';

/** Sets a property even when the key is `__proto__` (map keys come from user text). */
export function defineEntry(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}
