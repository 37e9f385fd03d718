/** Shape rules shared by validation and auto-complete. -1 is a variable-size dimension. */
export const WILDCARD_DIM = -1;

/** The tensor shape the model sees per request: reshape.shape when given, else dims. */
export function modelFacingDims(tensor: { dims?: number[]; reshape?: { shape?: number[] } }): number[] {
  return tensor.reshape ? (tensor.reshape.shape ?? []) : (tensor.dims ?? []);
}

/** Whether the model's shape can carry a batch: at least one dim and a variable first one. */
export function hasBatchDim(modelDims: readonly number[]): boolean {
  return modelDims.length > 0 && modelDims[0] === WILDCARD_DIM;
}

/** Element count, -1 when any dim is variable, 0 for an empty shape (as Triton counts). */
export function elementCount(dims: readonly number[]): number {
  if (dims.length === 0) return 0;
  if (dims.includes(WILDCARD_DIM)) return -1;
  return dims.reduce((a, b) => a * b, 1);
}

/** Products of the runs of fixed dims between variable dims: [2,4,-1,6] -> [8,6]. */
export function fixedRuns(dims: readonly number[]): number[] {
  const runs: number[] = [];
  let current = 1;
  for (const d of dims) {
    if (d === WILDCARD_DIM) {
      runs.push(current);
      current = 1;
    } else {
      current *= d;
    }
  }
  runs.push(current);
  return runs;
}

export const formatDims = (dims: readonly number[]): string => `[${dims.join(',')}]`;
