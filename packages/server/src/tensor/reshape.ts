/** Triton's `reshape` of a tensor's dims, for inputs (config dims to the model's) and outputs (back). */

/**
 * The shape the model receives for a tensor sent as `shape` (of config `dims`): the config's
 * `reshape` in place of the config dims, the batch dimension kept. The same array when there
 * is no reshape.
 */
export function reshapedShape(
  shape: readonly number[],
  dims: readonly number[],
  reshape: readonly number[] | undefined,
  batching: boolean,
): readonly number[] {
  return reshape ? reshapeDims(shape, dims, reshape, batching) : shape;
}

/**
 * Triton's reshape rule: `shape`, whose dims are `from` (after the batch dimension when
 * batching), as dims `to`, each -1 of `to` taking in order the size `shape` has where `from`
 * has -1. Inputs go from config dims to reshape, outputs from reshape back to config dims.
 */
export function reshapeDims(shape: readonly number[], from: readonly number[], to: readonly number[], batching: boolean): number[] {
  const offset = batching ? 1 : 0;
  const sizes = from.flatMap((d, i) => (d === -1 ? [shape[offset + i]!] : []));
  let next = 0;
  return [...shape.slice(0, offset), ...to.map((d) => (d === -1 ? sizes[next++]! : d))];
}
