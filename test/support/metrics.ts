/** One sample of a server's /metrics: the first line of `name`, of `model` when given, with `labels` among its labels; NaN when absent. */
export async function readMetric(metricsPort: number, name: string, model?: string, labels = ''): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const match = text
    .split('\n')
    .find(
      (line) =>
        line.startsWith(`${name} `) ||
        (line.startsWith(`${name}{`) && (!model || line.includes(`model="${model}"`)) && line.includes(labels)),
    );
  return match === undefined ? NaN : Number(match.slice(match.lastIndexOf(' ') + 1));
}
