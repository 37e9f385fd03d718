/** Softmax and top-k over rows of logits: the last step of both example pipelines. */

/** Softmax of one row, computed stably (the largest logit subtracted first). */
export function softmax(logits: ArrayLike<number>): Float32Array {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]);
  const out = new Float32Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    out[i] = Math.exp(logits[i] - max);
    sum += out[i];
  }
  for (let i = 0; i < out.length; i++) out[i] /= sum;
  return out;
}

export interface Ranked {
  readonly index: number;
  readonly score: number;
}

/** The k highest scores, highest first; ties keep the lower index first. */
export function topK(scores: ArrayLike<number>, k: number): Ranked[] {
  return Array.from(scores, (score, index) => ({ index, score }))
    .sort((a, b) => b.score - a.score || a.index - b.index)
    .slice(0, k);
}

/** labels.txt: one label per line, blank lines at the end ignored. */
export function parseLabels(text: string): string[] {
  const labels = text.split('\n').map((line) => line.replace(/\r$/, ''));
  while (labels.length > 0 && labels.at(-1) === '') labels.pop();
  return labels;
}
