/** Number of elements in a tensor of this (fully specified) shape. */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function formatShape(shape: readonly (number | bigint)[]): string {
  return `[${shape.join(',')}]`;
}
