import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, runningSum } from '@batchwise/modelgen';
import { isGpuMetric, metricNames, panelQueries, readGrafanaDashboard } from '../dashboards/src/grafana-dashboard.ts';
import { serveModels, postJson, type ServedModels } from './support/server.ts';

const dashboard = readGrafanaDashboard() as any;
const queries = panelQueries(dashboard);
const variableQueries: string[] = dashboard.templating.list.filter((v: any) => v.type === 'query').map((v: any) => v.definition);

describe('metric names in PromQL', () => {
  it('are the series read, without functions, keywords, labels, ranges or number exponents', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (le, model) (rate(a_bucket{model=~"$model", x="y{z}"}[$__rate_interval]))) / 1e6 + on (instance) b_total',
      ),
    ).toEqual(['a_bucket', 'b_total']);
    expect(metricNames('label_values(nv_inference_request_success{model=~"$model"}, version)')).toEqual(['nv_inference_request_success']);
  });
});

describe('the Grafana dashboard', () => {
  it('is importable as it is: a current schema, a Prometheus datasource variable every panel uses, model and version variables', () => {
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(39);
    const variables = dashboard.templating.list;
    expect(variables.map((v: any) => v.name)).toEqual(['datasource', 'model', 'version']);
    expect(variables[0]).toMatchObject({ type: 'datasource', query: 'prometheus' });
    for (const v of variables.slice(1))
      expect(v).toMatchObject({ datasource: { type: 'prometheus', uid: '${datasource}' }, includeAll: true });
    for (const panel of dashboard.panels.filter((p: any) => p.type !== 'row')) {
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
    }
    expect(new Set(dashboard.panels.map((p: any) => p.id)).size).toBe(dashboard.panels.length);
  });

  it('filters every per-version query by the model and version variables', () => {
    for (const { panel, expr } of queries) {
      if (/nv_inference_|batchwise_inference_|batchwise_sequence_/.test(expr))
        expect(expr, panel).toMatch(/model=~"\$model", version=~"\$version"/);
    }
  });

  describe('reads only metrics a real server exports', () => {
    let served: ServedModels;
    let scrape: string;
    beforeAll(async () => {
      served = await serveModels([
        {
          name: 'batched',
          model: identity('FP32', [4]),
          config: `name: "batched"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 1000 }`,
        },
        // The sequence batcher's series (Sequences row) exist for a version with sequence_batching.
        {
          name: 'stateful',
          model: runningSum(3),
          config: `name: "stateful"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 3 ] } ]
sequence_batching {
  direct { }
  state [ { input_name: "ACC_IN" output_name: "ACC_OUT" data_type: TYPE_FP32 dims: [ 3 ]
    initial_state: { name: "zeros" data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } ]
}`,
        },
      ]);
      const request = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] };
      const answers = await Promise.all(Array.from({ length: 8 }, () => postJson(`${served.server.url}/v2/models/batched/infer`, request)));
      expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
      // A failing request (wrong shape), so failures count too.
      expect(
        (await postJson(`${served.server.url}/v2/models/batched/infer`, { inputs: [{ ...request.inputs[0], shape: [1, 5] }] })).status,
      ).toBe(400);
      const step = {
        parameters: { sequence_id: 7, sequence_start: true },
        inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3], data: [1, 2, 3] }],
      };
      expect((await postJson(`${served.server.url}/v2/models/stateful/infer`, step)).status).toBe(200);
      scrape = await (await fetch(`http://127.0.0.1:${served.server.metricsPort}/metrics`)).text();
    });
    afterAll(() => served?.close());

    const exported = () =>
      new Set(scrape.split('\n').flatMap((line) => (line.startsWith('#') || line === '' ? [] : [/^[^{ ]+/.exec(line)![0]])));
    const declared = () => new Set(Array.from(scrape.matchAll(/^# TYPE (\S+) /gm), (m) => m[1]!));

    it('every panel query names series the server has samples of (GPU series: declared, as no GPU is here)', () => {
      const samples = exported();
      const types = declared();
      const missing: string[] = [];
      for (const { panel, refId, expr } of queries) {
        for (const name of metricNames(expr)) {
          // nv_gpu_* have samples only where nvidia-smi sees a GPU: the server must still declare them.
          const found = isGpuMetric(name) ? types.has(name) : samples.has(name);
          if (!found) missing.push(`${panel} (${refId}): ${name}`);
        }
      }
      expect(missing).toEqual([]);
      expect(queries.length).toBeGreaterThan(10);
    });

    it('the model and version variables read a series the server has', () => {
      const samples = exported();
      for (const query of variableQueries) for (const name of metricNames(query)) expect(samples, query).toContain(name);
    });
  });
});
