import { readFileSync } from 'node:fs';

/** The Grafana dashboard in the repository, importable as it is. */
export const GRAFANA_DASHBOARD_PATH = new URL('../grafana/batchwise.json', import.meta.url).pathname;

/** One PromQL query of one panel. */
export interface PanelQuery {
  readonly panel: string;
  readonly refId: string;
  readonly expr: string;
}

interface GrafanaPanel {
  readonly title: string;
  readonly type: string;
  readonly targets?: readonly { readonly refId: string; readonly expr: string }[];
  readonly panels?: readonly GrafanaPanel[];
}

export function readGrafanaDashboard(path: string = GRAFANA_DASHBOARD_PATH): { panels: readonly GrafanaPanel[]; [key: string]: unknown } {
  return JSON.parse(readFileSync(path, 'utf8'));
}

/** Every query of every panel, rows' nested panels included. */
export function panelQueries(dashboard: { readonly panels: readonly GrafanaPanel[] }): PanelQuery[] {
  const queries: PanelQuery[] = [];
  const visit = (panels: readonly GrafanaPanel[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) queries.push({ panel: panel.title, refId: target.refId, expr: target.expr });
      visit(panel.panels ?? []);
    }
  };
  visit(dashboard.panels);
  return queries;
}

/** Series only a server that sees a GPU exports (polled from nvidia-smi; the models' estimate per GPU once one loads there). */
export function isGpuMetric(name: string): boolean {
  return name.startsWith('nv_gpu_') || name.startsWith('batchwise_model_gpu_');
}

/**
 * A query as Prometheus receives it from Grafana with every model and version selected: the
 * template variables replaced by their "All" value and `$__rate_interval` by `rateInterval`.
 */
export function substituteVariables(expr: string, rateInterval: string): string {
  return expr.replaceAll('$__rate_interval', rateInterval).replaceAll('$model', '.*').replaceAll('$version', '.*');
}

const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'and',
  'or',
  'unless',
  'inf',
  'nan',
]);

/**
 * The metric names a PromQL expression reads: identifiers that are not functions (followed by
 * `(`), keywords, label matchers (`{...}`), ranges (`[...]`), strings or grouping labels. Enough
 * for the queries of our dashboard and Grafana's `label_values(series, label)`; not a PromQL parser.
 */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$/s, '$1')
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const match of stripped.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const after = stripped.slice(match.index + match[0].length).trimStart();
    if (after.startsWith('(') || KEYWORDS.has(match[0].toLowerCase())) continue;
    // The exponent of a number such as 1e6.
    if (match.index > 0 && /[0-9.]/.test(stripped[match.index - 1]!)) continue;
    names.add(match[0]);
  }
  return [...names];
}
