import { HttpClient } from '@batchwise/client';
import type { WindowOptions } from '@batchwise/client/load';
import { startServerProcess, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { fp32InferRequest, leanFp32Client } from '../lean-http.ts';
import { measureLean, type LeanReading } from '../lean-measure.ts';
import { environment, ratioCheck, reportScenario, uncheckedRatioNotes, type Check } from '../report.ts';
import { benchRepository, fp32Config, JS_IDENTITY } from '../workload.ts';
import { wrkInstalled, wrkLatency, wrkScript, type WrkLatency } from './wrk-check.ts';

/**
 * What `pnpm bench python` measures: the blank model (16 floats in, its input back) and the
 * preprocessing model (a 2048-float row normalized and clipped) as JavaScript and as Python.
 */
export type PythonTarget = 'js' | 'py' | 'js_pre' | 'py_pre';
export const PYTHON_MODELS: Readonly<Record<PythonTarget, string>> = { js: 'tiny_js', py: 'tiny_py', js_pre: 'pre_js', py_pre: 'pre_py' };
/** The blank models' width (overhead's) and the preprocessing's (the 4x2048 MLP's input). */
export const PYTHON_WIDTHS: Readonly<Record<PythonTarget, number>> = { js: 16, py: 16, js_pre: 2048, py_pre: 2048 };
/** Every model has this many instances (KIND_CPU): the Python ones a process each. */
export const PYTHON_INSTANCES = 2;

/**
 * Issue 43's targets, ratios of one run against the JavaScript model: the blank Python model's p50
 * at one client, its throughput at 16 clients, and the CPU per request of the server with its Python
 * processes at 16 clients and at one.
 */
export const PYTHON_TARGETS_43 = { p50OverJsC1: 1.5, throughputOverJsC16: 0.7, cpuOverJsC16: 2, cpuOverJsC1: 2 } as const;

/** The blank Python model: Triton's form, its INPUT0 back as OUTPUT0. */
export const PY_IDENTITY = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
`;

/** Preprocessing in numpy: each row standardized ((x - mean) / std, std with 1e-6 under the root), then clipped to [-3, 3]. */
export const PY_PREPROCESS = `import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            mean = x.mean(axis=1, keepdims=True)
            std = np.sqrt(x.var(axis=1, keepdims=True) + np.float32(1e-6))
            y = np.clip((x - mean) / std, np.float32(-3), np.float32(3)).astype(np.float32, copy=False)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", y)]))
        return responses
`;

/** The same preprocessing in JavaScript, a loop per row. */
export const JS_PREPROCESS = `import { tensor } from '@batchwise/backend';
export default {
  execute(requests) {
    return requests.map((r) => {
      const x = r.inputs.INPUT0;
      const [rows, width] = x.shape;
      const d = x.data;
      const y = new Float32Array(d.length);
      for (let i = 0; i < rows; i++) {
        const o = i * width;
        let sum = 0;
        for (let j = 0; j < width; j++) sum += d[o + j];
        const mean = sum / width;
        let squares = 0;
        for (let j = 0; j < width; j++) {
          const v = d[o + j] - mean;
          squares += v * v;
        }
        const inv = 1 / Math.sqrt(squares / width + 1e-6);
        for (let j = 0; j < width; j++) {
          const v = (d[o + j] - mean) * inv;
          y[o + j] = v < -3 ? -3 : v > 3 ? 3 : v;
        }
      }
      return { outputs: [tensor('OUTPUT0', 'FP32', x.shape, y)] };
    });
  },
};
`;

/**
 * The two repositories, in bench/.cache/repos/<scenario>-js and -py (emptied first): the blank and
 * the preprocessing model in JavaScript, and in Python; each max_batch_size 64, batching with no
 * delay, two instances.
 */
export async function pythonRepositories(scenario: string): Promise<{ js: string; py: string }> {
  const config = (target: PythonTarget) =>
    fp32Config(PYTHON_MODELS[target], {
      width: PYTHON_WIDTHS[target],
      maxBatchSize: 64,
      batching: true,
      delayUs: 0,
      backend: target.startsWith('py') ? 'python' : 'js',
      instances: PYTHON_INSTANCES,
    });
  const js = await benchRepository(`${scenario}-js`, [
    { name: PYTHON_MODELS.js, modelMjs: JS_IDENTITY, config: config('js') },
    { name: PYTHON_MODELS.js_pre, modelMjs: JS_PREPROCESS, config: config('js_pre') },
  ]);
  const py = await benchRepository(`${scenario}-py`, [
    { name: PYTHON_MODELS.py, modelPy: PY_IDENTITY, config: config('py') },
    { name: PYTHON_MODELS.py_pre, modelPy: PY_PREPROCESS, config: config('py_pre') },
  ]);
  return { js, py };
}

export interface PythonMeasurement {
  readonly target: PythonTarget;
  readonly concurrency: number;
  readonly reading: LeanReading;
}

export interface PythonWrkMeasurement extends WrkLatency {
  readonly target: 'js' | 'py';
  readonly connections: number;
}

export interface PythonResult {
  readonly measurements: PythonMeasurement[];
  readonly wrk: PythonWrkMeasurement[];
  readonly ratios: Record<string, number>;
  readonly checks: Check[];
}

/**
 * Issue 43: Triton's Python backend against the JavaScript backend on the same work. Two servers
 * side by side (one serving the JavaScript models, one the Python models, whose instances are
 * processes of their own), HTTP binary with the lean client, closed loop. At each concurrency the
 * blank models js, py, then py, js; at the top concurrency also the preprocessing models, so that
 * the order there is js, py, js_pre, py_pre and back. Each ratio compares the means of a target's
 * two measurements. The server's CPU counts its descendant processes (the Python stubs). Then,
 * where wrk is installed and `wrkSeconds` > 0, the blank models' one-connection p50 from wrk (a C
 * client), js, py, py, js.
 */
export async function runPython(options: {
  concurrencies: readonly number[];
  windows: WindowOptions;
  /** Seconds of each wrk run (0: none). */
  wrkSeconds: number;
  /** @default true */
  mirrored?: boolean;
  log: (line: string) => void;
  name?: string;
}): Promise<PythonResult> {
  const { log } = options;
  const env = environment();
  const name = options.name ?? 'python';
  const repos = await pythonRepositories(name);
  const measurements: PythonMeasurement[] = [];
  const wrk: PythonWrkMeasurement[] = [];
  const top = Math.max(...options.concurrencies);
  const jsStart = startServerProcess(['--model-repository', repos.js]);
  const pyStart = startServerProcess(['--model-repository', repos.py]);
  try {
    const [jsServer, pyServer] = await Promise.all([jsStart, pyStart]);
    const serverOf = (target: PythonTarget): ServerProcess => (target.startsWith('py') ? pyServer : jsServer);
    await checkAnswers(serverOf);
    const measureTarget = async (
      target: PythonTarget,
      concurrency: number,
      windows: WindowOptions,
      label = `${target} c=${concurrency}`,
    ) => {
      const server = serverOf(target);
      const model = PYTHON_MODELS[target];
      const client = leanFp32Client(server.httpUrl, model, PYTHON_WIDTHS[target]);
      try {
        const probe = { pid: server.child.pid!, stats: { httpUrl: server.httpUrl, model }, descendants: true };
        return await measureLean(label, client, { concurrency }, { ...windows, log }, probe);
      } finally {
        client.close();
      }
    };
    const all: readonly PythonTarget[] = ['js', 'py', 'js_pre', 'py_pre'];
    // One unrecorded window of each at the top concurrency first, so that none is measured cold (overhead's priming).
    const priming = { ...options.windows, warmupMs: 0, minWindows: 1, maxWindows: 1 };
    for (const target of all) await measureTarget(target, top, priming, `priming ${target} c=${top}`);
    for (const concurrency of options.concurrencies) {
      const targets = concurrency === top ? all : all.filter((t) => !t.endsWith('_pre'));
      const order = options.mirrored === false ? targets : [...targets, ...[...targets].reverse()];
      for (const target of order) {
        measurements.push({ target, concurrency, reading: await measureTarget(target, concurrency, options.windows) });
      }
    }
    if (options.wrkSeconds > 0 && !(await wrkInstalled())) log('wrk is not installed: no C client measurement');
    else if (options.wrkSeconds > 0) {
      const scripts = { js: await wrkScript(PYTHON_MODELS.js, 16), py: await wrkScript(PYTHON_MODELS.py, 16) };
      const order = ['js', 'py', 'py', 'js'] as const;
      for (const target of options.mirrored === false ? order.slice(0, 2) : order) {
        const server = serverOf(target);
        const reading = await wrkLatency(server.httpUrl, PYTHON_MODELS[target], scripts[target], 1, options.wrkSeconds);
        log(`wrk ${target} c=1: ${reading.perSecond.toFixed(0)}/s, p50 ${reading.p50Ms.toFixed(3)} ms, p99 ${reading.p99Ms.toFixed(3)} ms`);
        wrk.push({ target, connections: 1, ...reading });
      }
    }
  } finally {
    await Promise.allSettled([jsStart.then((s) => s.stop()), pyStart.then((s) => s.stop())]);
  }

  const mean = (target: PythonTarget, concurrency: number, of: (r: LeanReading) => number | undefined): number => {
    const values = measurements.filter((m) => m.target === target && m.concurrency === concurrency).map((m) => of(m.reading));
    return values.length === 0 || values.some((v) => v === undefined) ? NaN : values.reduce((a: number, b) => a + b!, 0) / values.length;
  };
  const ratios: Record<string, number> = {};
  const checks: Check[] = [];
  const check = (key: string, bound: { atMost: number } | { atLeast: number }, detail = '') =>
    checks.push(ratioCheck(key, ratios[key]!, bound, detail));
  const T = PYTHON_TARGETS_43;
  const p50 = (r: LeanReading) => r.client.latencyMs.p50;
  const throughput = (r: LeanReading) => r.client.throughput;
  const cpu = (r: LeanReading) => r.serverCpuMsPerAnswer;
  const us = (ms: number) => `${Math.round(ms * 1000)} us`;
  for (const c of options.concurrencies) {
    const pairs: [PythonTarget, PythonTarget, string][] = [
      ['py', 'js', ''],
      ...(c === top ? [['py_pre', 'js_pre', 'pre_'] as [PythonTarget, PythonTarget, string]] : []),
    ];
    for (const [py, js, tag] of pairs) {
      ratios[`${tag}p50_py_vs_js_c${c}`] = mean(py, c, p50) / mean(js, c, p50);
      ratios[`${tag}p99_py_vs_js_c${c}`] = mean(py, c, (r) => r.client.latencyMs.p99) / mean(js, c, (r) => r.client.latencyMs.p99);
      ratios[`${tag}throughput_py_vs_js_c${c}`] = mean(py, c, throughput) / mean(js, c, throughput);
      ratios[`${tag}server_cpu_py_vs_js_c${c}`] = mean(py, c, cpu) / mean(js, c, cpu);
    }
    const cpuDetail = `${us(mean('py', c, cpu))} vs ${us(mean('js', c, cpu))} a request`;
    if (c === 1) {
      check('p50_py_vs_js_c1', { atMost: T.p50OverJsC1 }, `${mean('py', 1, p50).toFixed(3)} vs ${mean('js', 1, p50).toFixed(3)} ms`);
      check('server_cpu_py_vs_js_c1', { atMost: T.cpuOverJsC1 }, cpuDetail);
    }
    if (c === 16) {
      check(
        'throughput_py_vs_js_c16',
        { atLeast: T.throughputOverJsC16 },
        `${Math.round(mean('py', 16, throughput))} vs ${Math.round(mean('js', 16, throughput))} /s`,
      );
      check('server_cpu_py_vs_js_c16', { atMost: T.cpuOverJsC16 }, cpuDetail);
    }
  }
  if (wrk.length > 0) {
    const wrkMean = (target: 'js' | 'py', of: (w: PythonWrkMeasurement) => number) => {
      const values = wrk.filter((w) => w.target === target).map(of);
      return values.reduce((a, b) => a + b, 0) / values.length;
    };
    ratios['wrk_p50_py_vs_js_c1'] = wrkMean('py', (w) => w.p50Ms) / wrkMean('js', (w) => w.p50Ms);
    ratios['wrk_p99_py_vs_js_c1'] = wrkMean('py', (w) => w.p99Ms) / wrkMean('js', (w) => w.p99Ms);
    check(
      'wrk_p50_py_vs_js_c1',
      { atMost: T.p50OverJsC1 },
      `wrk: ${wrkMean('py', (w) => w.p50Ms).toFixed(3)} vs ${wrkMean('js', (w) => w.p50Ms).toFixed(3)} ms`,
    );
  }

  const LABEL: Record<PythonTarget, string> = {
    js: 'blank js',
    py: 'blank python',
    js_pre: 'preprocess js',
    py_pre: 'preprocess python',
  };
  const cpuUs = (ms: number | undefined) => (ms === undefined ? '' : Math.round(ms * 1000));
  const headers = [
    'model',
    'clients',
    'infer/s',
    'p50 ms',
    'p99 ms',
    'errors',
    'avg batch',
    'server cpu us/req',
    'of it python us/req',
    'python procs',
    'client cpu',
    'other cpu',
  ];
  const rows: (string | number)[][] = measurements.map((m) => {
    const r = m.reading;
    const answers = r.client.throughput * r.windowSeconds;
    return [
      LABEL[m.target],
      m.concurrency,
      r.client.throughput,
      r.client.latencyMs.p50.toFixed(3),
      r.client.latencyMs.p99.toFixed(3),
      r.client.errors,
      r.server?.avgBatchSize ?? '',
      cpuUs(r.serverCpuMsPerAnswer),
      r.descendantCpuSeconds === undefined || answers <= 0 ? '' : cpuUs((r.descendantCpuSeconds * 1000) / answers),
      r.descendants ?? '',
      r.clientCores,
      r.otherCores ?? '',
    ];
  });
  const tables = [{ headers, rows }];
  if (wrk.length > 0) {
    tables.push({
      headers: ['wrk (C client), 1 connection', 'infer/s', 'p50 ms', 'p99 ms', 'errors'],
      rows: wrk.map((w) => [LABEL[w.target], w.perSecond, w.p50Ms.toFixed(3), w.p99Ms.toFixed(3), w.errors]),
    } as (typeof tables)[number]);
  }
  await reportScenario(
    {
      name,
      title: 'pnpm bench python: Triton-style Python models (one process per instance) against the same models in JavaScript',
      intro:
        `A blank model (16 FP32 in, its input back) and a preprocessing model (a 2048-float row standardized and clipped; numpy ` +
        `against a JavaScript loop), ${PYTHON_INSTANCES} instances each, max_batch_size 64, batching with no delay; the JavaScript ` +
        `models on one server, the Python ones on another. HTTP binary, the lean client, closed loop at ${options.concurrencies.join(' and ')} ` +
        `clients (preprocessing at ${top}); ${options.mirrored === false ? 'each target once' : 'each target, then each again in reverse order'}, ` +
        `windows of ${options.windows.windowMs} ms. Server CPU is the server process's and its descendants' (the Python processes) ` +
        `(${env['date']}).`,
      tables,
      notes: uncheckedRatioNotes(ratios, checks),
      checks,
      json: { concurrencies: options.concurrencies, environment: env, measurements, wrk, ratios, checks },
    },
    log,
  );
  return { measurements, wrk, ratios, checks };
}

/**
 * Before any load: each model answers one request, the blank ones with their input and the two
 * preprocessing models alike (within float rounding), so that the comparison is of the same work.
 */
async function checkAnswers(serverOf: (target: PythonTarget) => ServerProcess): Promise<void> {
  const outputs: Partial<Record<PythonTarget, Float32Array>> = {};
  for (const target of ['js', 'py', 'js_pre', 'py_pre'] as const) {
    const client = new HttpClient({ url: serverOf(target).httpUrl, connections: 1 });
    try {
      const request = fp32InferRequest(PYTHON_MODELS[target], PYTHON_WIDTHS[target]);
      const result = await client.infer(request);
      const output = result.outputs.find((o) => o.name === 'OUTPUT0');
      if (!output || output.datatype !== 'FP32' || output.shape.join() !== `1,${PYTHON_WIDTHS[target]}`) {
        throw new Error(
          `${PYTHON_MODELS[target]}: expected OUTPUT0 FP32 [1,${PYTHON_WIDTHS[target]}], got ${JSON.stringify(result.outputs)}`,
        );
      }
      outputs[target] = output.data as Float32Array;
      if (!target.endsWith('_pre') && output.data.join() !== request.inputs[0]!.data!.join()) {
        throw new Error(`${PYTHON_MODELS[target]} did not return its input`);
      }
    } finally {
      await client.close();
    }
  }
  const a = outputs.js_pre!;
  const b = outputs.py_pre!;
  const worst = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);
  if (!(worst <= 1e-4)) throw new Error(`the preprocessing models disagree: ${worst} at most between JavaScript and numpy`);
}
