/**
 * `pnpm dashboards:check`: a real Prometheus (Debian's package) scrapes a real Batchwise server
 * under load, then every panel query of the Grafana dashboard runs through Prometheus's HTTP API.
 * Fails naming each panel whose query returns no data, so a renamed metric cannot blank a panel
 * silently. GPU panels are skipped, and said so, where nvidia-smi sees no GPU.
 *
 * Not part of the test suite: it may install a package and takes about a minute. An optional
 * argument checks another dashboard file instead of dashboards/grafana/batchwise.json.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isGpuMetric, metricNames, panelQueries, readGrafanaDashboard, substituteVariables } from './grafana-dashboard.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const PROMETHEUS = '/usr/bin/prometheus';
/** The rate window Grafana would pick for 1 s scrapes is shorter; 30 s holds many samples. */
const RATE_INTERVAL = '30s';
/** How long the panel queries may take to return data once Prometheus scrapes the server. */
const DEADLINE_MS = 90_000;
const LOAD_CONCURRENCY = 4;
/** A model from examples/model_repository with dynamic batching. */
const MODEL = 'simple';
/**
 * Two models that a request loads (--load-on-demand) and that evict each other under the model memory
 * limit, asked for in turn: loads, evictions, their times and the requests that waited (many models per host).
 */
const ON_DEMAND = ['convnet', 'encoder'] as const;
/**
 * The stateful example model (direct sequence batching, 8 slots on its one instance), loaded through the
 * model control API with a config override whose max_sequence_idle_microseconds is IDLE_US: its own
 * minute would leave the Sequences row's idle releases at 0 for most of the check.
 */
const SEQUENCE_MODEL = 'running_sum';
const SEQUENCE_SLOTS = 8;
const IDLE_US = 2_000_000;
const modelFileBytes = (model: string) => statSync(join(ROOT, 'examples/model_repository', model, '1', 'model.onnx')).size;

const log = (line: string) => console.log(`[dashboards:check] ${line}`);
const children: ChildProcess[] = [];

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function ensurePrometheus(): void {
  if (spawnSync(PROMETHEUS, ['--version']).status === 0) return;
  log('prometheus is missing: apt-get update && apt-get install -y prometheus');
  for (const args of [['update'], ['install', '-y', 'prometheus']]) {
    const result = spawnSync('apt-get', args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    if (result.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed`);
  }
}

function hasGpu(): boolean {
  return spawnSync('nvidia-smi', ['-L']).status === 0;
}

function start(name: string, command: string, args: string[]): ChildProcess {
  const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  child.once('exit', (code, signal) => {
    if (!stopping) log(`${name} exited early (${code ?? signal}):\n${stderr}`);
  });
  children.push(child);
  return child;
}

async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const gone = children.find((c) => c.exitCode !== null || c.signalCode !== null);
    if (gone) throw new Error(`${gone.spawnfile} exited while waiting for ${what}`);
    if (await probe().catch(() => false)) return;
    await sleep(500);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Loads the sequence model through the model control API, its repository config with IDLE_US as the idle time. */
async function loadSequenceModel(httpPort: number): Promise<void> {
  const base = `http://127.0.0.1:${httpPort}`;
  // With --load-on-demand, asking for the config loads the repository's version.
  const response = await fetch(`${base}/v2/models/${SEQUENCE_MODEL}/config`);
  if (!response.ok) throw new Error(`${SEQUENCE_MODEL} config: ${response.status} ${await response.text()}`);
  const config = (await response.json()) as { sequence_batching: Record<string, unknown> };
  const repositoryIdleUs = Number(config.sequence_batching['max_sequence_idle_microseconds']);
  config.sequence_batching['max_sequence_idle_microseconds'] = IDLE_US;
  const load = await fetch(`${base}/v2/repository/models/${SEQUENCE_MODEL}/load`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ parameters: { config: JSON.stringify(config) } }),
  });
  if (!load.ok) throw new Error(`${SEQUENCE_MODEL} load with a config override: ${load.status} ${await load.text()}`);
  log(
    `${SEQUENCE_MODEL} loaded with max_sequence_idle_microseconds ${IDLE_US} (its repository config says ${repositoryIdleUs}, ` +
      'longer than the check), so sequences left without END are released while it runs',
  );
}

/**
 * Closed-loop load on the example model, with one invalid request in 20 so failures count too; metadata
 * requests that load and evict the on-demand models; and sequences on the sequence model.
 */
function startLoad(httpPort: number): { stop(): Promise<{ requests: number; sequences: number; abandoned: number }> } {
  const url = `http://127.0.0.1:${httpPort}/v2/models/${MODEL}/infer`;
  const ints = Array.from({ length: 16 }, (_, i) => i);
  const good = JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: ints },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: ints },
    ],
  });
  const bad = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: ints }] });
  let running = true;
  let sent = 0;
  const loop = async () => {
    while (running) {
      const body = ++sent % 20 === 0 ? bad : good;
      await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
        .then((r) => r.arrayBuffer())
        .catch(() => sleep(100));
    }
  };
  // Metadata requests load a model too: one of the two every second, each evicting the other.
  const turns = async () => {
    for (let i = 0; running; i++) {
      await fetch(`http://127.0.0.1:${httpPort}/v2/models/${ON_DEMAND[i % 2]}`)
        .then((r) => r.arrayBuffer())
        .catch(() => undefined);
      await sleep(1000);
    }
  };
  // Sequences: first one more START than there are slots, none ended, so one waits in the backlog until
  // idle releases free the slots; then sequences of five requests one after another, every fourth left
  // without its END to go idle.
  const sequenceUrl = `http://127.0.0.1:${httpPort}/v2/models/${SEQUENCE_MODEL}/infer`;
  let sequences = 0;
  let abandoned = 0;
  const step = (id: number, flags: { sequence_start?: boolean; sequence_end?: boolean }) =>
    fetch(sequenceUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        parameters: { sequence_id: id, ...flags },
        inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3], data: [1, 2, 3] }],
      }),
    })
      .then((r) => r.arrayBuffer())
      .catch(() => sleep(100));
  const sequenceLoop = async () => {
    const burst = Array.from({ length: SEQUENCE_SLOTS + 1 }, (_, i) => 1 + i);
    sequences += burst.length;
    abandoned += burst.length;
    void Promise.all(burst.map((id) => step(id, { sequence_start: true })));
    await sleep(200);
    for (let id = 100; running; id++) {
      sequences++;
      await step(id, { sequence_start: true });
      for (let i = 0; i < 3 && running; i++) {
        await sleep(200);
        await step(id, {});
      }
      await sleep(200);
      if (id % 4 === 0) abandoned++;
      else await step(id, { sequence_end: true });
    }
  };
  const loops = [...Array.from({ length: LOAD_CONCURRENCY }, loop), turns(), sequenceLoop()];
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return { requests: sent, sequences, abandoned };
    },
  };
}

interface PrometheusAnswer {
  readonly status: string;
  readonly error?: string;
  readonly data: unknown;
}

async function prometheusGet(base: string, path: string, params: Record<string, string>): Promise<PrometheusAnswer> {
  const response = await fetch(`${base}${path}?${new URLSearchParams(params)}`);
  return (await response.json()) as PrometheusAnswer;
}

/** True when an instant query returns at least one sample that is a number (not NaN). */
async function returnsData(base: string, expr: string): Promise<{ ok: boolean; why: string }> {
  const answer = await prometheusGet(base, '/api/v1/query', { query: expr });
  if (answer.status !== 'success') return { ok: false, why: `error: ${answer.error}` };
  const result = (answer.data as { result: { value: [number, string] }[] }).result;
  if (result.length === 0) return { ok: false, why: 'no series' };
  return result.some((r) => !Number.isNaN(Number(r.value[1]))) ? { ok: true, why: '' } : { ok: false, why: 'only NaN' };
}

let stopping = false;

async function main(): Promise<number> {
  ensurePrometheus();
  const gpu = hasGpu();
  const dashboard = readGrafanaDashboard(process.argv[2]);
  const queries = panelQueries(dashboard).map((q) => ({
    ...q,
    promql: substituteVariables(q.expr, RATE_INTERVAL),
    gpu: metricNames(q.expr).some(isGpuMetric),
  }));
  const variables = (dashboard['templating'] as { list: { type: string; name: string; definition?: string }[] }).list.filter(
    (v) => v.type === 'query',
  );
  log(`${queries.length} panel queries; GPU ${gpu ? 'present: GPU panels checked' : 'absent: GPU panels will be skipped'}`);

  const [httpPort, grpcPort, metricsPort, prometheusPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const work = await mkdtemp(join(tmpdir(), 'batchwise-dashboards-'));
  try {
    log(`starting batchwise (models ${MODEL} and ${SEQUENCE_MODEL} from examples/model_repository), metrics on 127.0.0.1:${metricsPort}`);
    start('batchwise', process.execPath, [
      '--import',
      'tsx',
      'packages/server/src/cli/main.ts',
      'serve',
      '--model-repository',
      'examples/model_repository',
      '--model-control-mode',
      'explicit',
      '--load-model',
      MODEL,
      // Room for the pinned models and one of the two others: each load of one evicts the other.
      '--load-on-demand',
      '--model-memory-limit',
      String(modelFileBytes(MODEL) + modelFileBytes(SEQUENCE_MODEL) + modelFileBytes(ON_DEMAND[0]) + modelFileBytes(ON_DEMAND[1]) - 1),
      '--http-address',
      '127.0.0.1',
      '--http-port',
      String(httpPort),
      '--grpc-port',
      String(grpcPort),
      '--metrics-port',
      String(metricsPort),
    ]);
    await waitFor('the server to be ready', async () => (await fetch(`http://127.0.0.1:${httpPort}/v2/health/ready`)).ok);
    await loadSequenceModel(httpPort);
    log('server ready; starting load');
    const load = startLoad(httpPort);

    const config = join(work, 'prometheus.yml');
    await writeFile(
      config,
      [
        'global:',
        '  scrape_interval: 1s',
        '  evaluation_interval: 1s',
        'scrape_configs:',
        '  - job_name: batchwise',
        '    static_configs:',
        `      - targets: ['127.0.0.1:${metricsPort}']`,
        '',
      ].join('\n'),
    );
    log(`starting ${PROMETHEUS} on 127.0.0.1:${prometheusPort}`);
    start('prometheus', PROMETHEUS, [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(work, 'data')}`,
      `--web.listen-address=127.0.0.1:${prometheusPort}`,
    ]);
    const base = `http://127.0.0.1:${prometheusPort}`;
    await waitFor('Prometheus to be ready', async () => (await fetch(`${base}/-/ready`)).ok);
    await waitFor('the first scrape', async () => (await returnsData(base, 'up{job="batchwise"} == 1')).ok);
    log('Prometheus scrapes the server; running the panel queries until each returns data');

    const required = queries.filter((q) => gpu || !q.gpu);
    const pending = new Map(required.map((q) => [q, 'not run']));
    const deadline = Date.now() + DEADLINE_MS;
    while (pending.size > 0 && Date.now() < deadline) {
      for (const q of [...pending.keys()]) {
        const { ok, why } = await returnsData(base, q.promql);
        if (ok) pending.delete(q);
        else pending.set(q, why);
      }
      log(`${required.length - pending.size}/${required.length} queries return data`);
      if (pending.size > 0) await sleep(2000);
    }

    // A rate of 0 is data too: that the idle releases panel draws some, not only zeros, needs a release counted.
    const idleReleases = `sum(batchwise_sequence_idle_releases_total{model="${SEQUENCE_MODEL}"}) > 0`;
    await waitFor('an idle release of a sequence', async () => (await returnsData(base, idleReleases)).ok, 30_000);
    const released = await prometheusGet(base, '/api/v1/query', { query: idleReleases });
    log(
      `idle releases of ${SEQUENCE_MODEL} sequences counted: ${(released.data as { result: { value: [number, string] }[] }).result[0]?.value[1]}`,
    );

    const variableFailures: string[] = [];
    for (const v of variables) {
      const match = /^label_values\((.*),\s*(\w+)\)$/.exec(v.definition ?? '');
      if (!match) continue;
      const answer = await prometheusGet(base, `/api/v1/label/${match[2]}/values`, {
        'match[]': substituteVariables(match[1]!, RATE_INTERVAL),
      });
      const values = answer.data as string[];
      if (answer.status !== 'success' || values.length === 0) variableFailures.push(v.name);
      else log(`variable $${v.name}: ${values.join(', ')}`);
    }
    const { requests, sequences, abandoned } = await load.stop();
    log(`load stopped after ${requests} requests to ${MODEL} and ${sequences} sequences (${abandoned} left to go idle)`);

    for (const q of queries) {
      const status = !gpu && q.gpu ? 'SKIPPED (no GPU)' : pending.has(q) ? `NO DATA (${pending.get(q)})` : 'ok';
      log(`${status.padEnd(16)} ${q.panel} [${q.refId}]: ${q.promql}`);
    }
    const blank = [...new Set([...pending.keys()].map((q) => q.panel))];
    for (const name of variableFailures) log(`FAILED variable $${name} has no values`);
    if (blank.length > 0) log(`FAILED: panels without data: ${blank.join('; ')}`);
    const skipped = queries.filter((q) => !gpu && q.gpu).length;
    log(
      `${required.length - pending.size}/${required.length} queries return data, ${skipped} GPU queries skipped` +
        (blank.length + variableFailures.length === 0 ? ': PASS' : ': FAIL'),
    );
    return blank.length + variableFailures.length === 0 ? 0 : 1;
  } finally {
    stopping = true;
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : null)));
    await rm(work, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(`FAILED: ${error instanceof Error ? error.message : String(error)}`);
    stopping = true;
    for (const child of children) child.kill('SIGTERM');
    process.exit(1);
  },
);
