/** `--steps 5,25,50,100`: ascending weights in 0..100. */
export function parseSteps(text: string): number[] {
  const steps = text.split(',').map((s) => Number(s.trim()));
  if (steps.length === 0 || steps.some((s) => !Number.isFinite(s) || s < 0 || s > 100)) {
    throw new Error(`--steps must be weights between 0 and 100 separated by commas, e.g. 5,25,50,100; got '${text}'`);
  }
  if (steps.some((s, i) => i > 0 && s <= steps[i - 1]!)) throw new Error(`--steps must increase, got '${text}'`);
  return steps;
}
