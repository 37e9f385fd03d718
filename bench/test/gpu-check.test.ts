import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import type { ModelStatistics } from '@batchwise/client';
import { mlp } from '@batchwise/modelgen/models';
import { writeModel } from '@batchwise/modelgen/graph-builder';
import { mulberry32, uniformFloat32 } from '@batchwise/modelgen/prng';
import { againstTarget } from '../gpu-check/check.ts';
import { executionTable, executionTimes, summarizeExecutions } from '../gpu-check/execution-times.ts';
import { summarizeProfile, type ProfileEvent } from '../gpu-check/ort-profile.ts';
import { npyBytes, TORCH_MODEL_PY, writeTorchModel } from '../gpu-check/torch-model.ts';
import {
  fastestServable,
  servable,
  variantSettings,
  variantSummary,
  variantTable,
  WEBGPU_VARIANTS,
  type VariantResult,
} from '../gpu-check/webgpu-variants.ts';
import { ortSessionOptions } from '@batchwise/server/backends/onnxruntime/session-options.ts';

/** The GPU check's own arithmetic (issue 45): what it reads off statistics and profiles, and the PyTorch model's weights. */

const stat = (count: number, ns: number) => ({ count, ns });

function stats(batches: [size: number, executions: number, inferNs: number][]): ModelStatistics {
  const zero = stat(0, 0);
  return {
    name: 'm',
    version: '1',
    last_inference: 0,
    inference_count: 0,
    execution_count: 0,
    inference_stats: {
      success: zero,
      fail: zero,
      queue: zero,
      compute_input: zero,
      compute_infer: zero,
      compute_output: zero,
      cache_hit: zero,
      cache_miss: zero,
    },
    batch_stats: batches.map(([batch_size, n, ns]) => ({
      batch_size,
      compute_input: stat(n, n * 1000),
      compute_infer: stat(n, ns),
      compute_output: stat(n, n * 2000),
    })),
    memory_usage: [],
    response_stats: {},
  };
}

describe('per-execution times from the statistics', () => {
  it("divides each batch size's summed compute_infer by its executions, between two readings", () => {
    const before = stats([[1, 10, 10 * 2_000_000]]);
    const after = stats([
      [1, 30, 10 * 2_000_000 + 20 * 500_000],
      [8, 4, 4 * 3_000_000],
    ]);
    const rows = executionTimes(after, before);
    expect(rows).toEqual([
      { batchSize: 1, executions: 20, inputMs: 0.001, inferMs: 0.5, outputMs: 0.002 },
      { batchSize: 8, executions: 4, inputMs: 0.001, inferMs: 3, outputMs: 0.002 },
    ]);
    const summary = summarizeExecutions(rows);
    expect(summary.executions).toBe(24);
    expect(summary.meanBatch).toBeCloseTo((20 + 32) / 24);
    expect(summary.meanInferMs).toBeCloseTo((20 * 0.5 + 4 * 3) / 24);
    expect(summary.batchOne?.inferMs).toBe(0.5);
    expect(summary.largest?.batchSize).toBe(8);
    const table = executionTable([{ model: 'm', rows }]).join('\n');
    expect(table).toContain('| m | 24 | 2.2 | 0.917 | 0.500 (batch 1, 20x) | 0.500 (batch 1, 20x) | 3.000 (batch 8, 4x) |');
  });

  it('says by how much a target is missed', () => {
    expect(againstTarget(1.5, 3, true, 'x')).toBe('x1.50, target >= x3 MISSED by 2.00x');
    expect(againstTarget(2.4, 0.5, false, 'ms')).toBe('2.40 ms, target <= 0.5 ms MISSED by 4.80x');
    expect(againstTarget(0.25, 0.5, false, 'ms')).toBe('0.25 ms, target <= 0.5 ms met');
  });
});

describe("ONNX Runtime's profile", () => {
  const node = (name: string, op: string, provider: string, ts: number, dur: number): ProfileEvent => ({
    cat: 'Node',
    name: `${name}_kernel_time`,
    ts,
    dur,
    args: { op_name: op, provider },
  });

  it('summarizes the last model_run: nodes by provider, uploads and read-backs, the time in no node', () => {
    const events: ProfileEvent[] = [
      { cat: 'Session', name: 'session_initialization', ts: 0, dur: 900 },
      { cat: 'Session', name: 'model_run', ts: 1000, dur: 5000 },
      node('mm0', 'MatMul', 'WebGpuExecutionProvider', 1100, 3000),
      { cat: 'Session', name: 'model_run', ts: 10_000, dur: 2400 },
      node('Memcpy', 'MemcpyFromHost', 'WebGpuExecutionProvider', 10_010, 40),
      node('mm0', 'MatMul', 'WebGpuExecutionProvider', 10_100, 30),
      node('shape', 'Shape', 'CPUExecutionProvider', 10_200, 5),
      node('Memcpy_token_1', 'MemcpyToHost', 'WebGpuExecutionProvider', 10_300, 2000),
      { cat: 'Session', name: 'SequentialExecutor::Execute', ts: 10_005, dur: 2390 },
    ];
    const s = summarizeProfile(events);
    expect(s.runsUs).toEqual([5000, 2400]);
    expect(s.runUs).toBe(2400);
    expect(s.nodes.map((n) => n.node)).toEqual(['Memcpy', 'mm0', 'shape', 'Memcpy_token_1']);
    expect(s.byProvider).toEqual({ WebGpuExecutionProvider: { nodes: 3, us: 2070 }, CPUExecutionProvider: { nodes: 1, us: 5 } });
    expect(s.uploads).toEqual({ nodes: 1, us: 40 });
    expect(s.readBacks).toEqual({ nodes: 1, us: 2000 });
    expect(s.kernels).toEqual({ nodes: 2, us: 35 });
    expect(s.outsideNodesUs).toBe(2400 - 2075);
    expect(s.others).toEqual([{ cat: 'Session', name: 'SequentialExecutor::Execute', count: 1, us: 2390 }]);
    expect(s.setup).toEqual([{ name: 'session_initialization', us: 900 }]);
  });

  it('refuses a profile without a run', () => {
    expect(() => summarizeProfile([{ cat: 'Session', name: 'session_initialization', ts: 0, dur: 1 }])).toThrow(/no model_run/);
  });
});

const python = spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' });
const hasNumpy = python.status === 0;

describe.skipIf(!hasNumpy)("the PyTorch step's model (python3 and numpy, no torch)", () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpu-check-torch-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('writes .npy files numpy reads as written', () => {
    const file = join(dir, 'x.npy');
    const data = Float32Array.from([1.5, -2, 3.25, 0, 0.125, 6]);
    writeFileSync(file, npyBytes([2, 3], data));
    const read = spawnSync('python3', ['-c', `import numpy; a = numpy.load('${file}'); print(a.dtype, a.shape, a.ravel().tolist())`], {
      encoding: 'utf8',
    });
    expect(read.stderr).toBe('');
    expect(read.stdout.trim()).toBe(`float32 (2, 3) [1.5, -2.0, 3.25, 0.0, 0.125, 6.0]`);
  });

  it("exports the ONNX MLP's weights beside model.py: relu(x @ w + b) over them is ONNX Runtime's answer", async () => {
    const width = 32;
    const onnxFile = join(dir, 'mlp.onnx');
    await writeModel(onnxFile, mlp({ layers: 3, width, seed: 7 }));
    const repo = join(dir, 'repo');
    const written = await writeTorchModel({ repo, name: 'mlp_torch', onnxFile, config: 'name: "mlp_torch"' });
    expect(written).toEqual({ layers: 3, weightBytes: 3 * (width * width + width) * 4 });
    const version = join(repo, 'mlp_torch', '1');
    expect(readdirSync(version).sort()).toEqual(['b0.npy', 'b1.npy', 'b2.npy', 'model.py', 'w0.npy', 'w1.npy', 'w2.npy']);

    const x = uniformFloat32(mulberry32(3), 2 * width, 1);
    const session = await ort.InferenceSession.create(onnxFile, { executionProviders: ['cpu'] });
    const expected = (await session.run({ INPUT0: new ort.Tensor('float32', x, [2, width]) }))['OUTPUT0']!.data as Float32Array;
    await session.release();
    // The layer structure torch_mlp.py computes with torch, in numpy.
    const script = [
      'import json, sys, numpy as np',
      `d = ${JSON.stringify(version)}`,
      `x = np.array(json.loads(sys.argv[1]), dtype=np.float32).reshape(2, ${width})`,
      'for l in range(3):',
      "    x = np.maximum(x @ np.load('%s/w%d.npy' % (d, l)) + np.load('%s/b%d.npy' % (d, l)), 0)",
      'print(json.dumps(x.ravel().tolist()))',
    ].join('\n');
    const run = spawnSync('python3', ['-c', script, JSON.stringify(Array.from(x))], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    const got = JSON.parse(run.stdout) as number[];
    expect(got).toHaveLength(expected.length);
    for (let i = 0; i < got.length; i++) expect(got[i]).toBeCloseTo(expected[i]!, 4);
  });

  it('model.py compiles', () => {
    const compiled = spawnSync('python3', ['-c', `import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])`, TORCH_MODEL_PY], {
      encoding: 'utf8',
    });
    expect(compiled.stderr).toBe('');
    expect(compiled.status).toBe(0);
  });
});

describe('the WebGPU session settings sweep (webgpu-variants.ts)', () => {
  const timed = (b1: number) => ({
    1: { medianMs: b1, minMs: b1 * 0.9, p90Ms: b1 * 1.2, count: 200 },
    16: { medianMs: b1 * 2, minMs: b1, p90Ms: b1 * 3, count: 50 },
    64: { medianMs: b1 * 4, minMs: b1 * 3, p90Ms: b1 * 5, count: 50 },
  });
  const results: VariantResult[] = [
    { name: 'as served', ok: true, createMs: 900, runs: timed(2.4), worst: 0.03 },
    { name: 'probe', ok: true, createMs: 100, runs: timed(0.1), worst: 0.01 },
    { name: 'capture', ok: true, createMs: 900, runs: timed(0.3), worst: 40 },
    { name: 'no validation', ok: true, createMs: 900, runs: timed(1.2), worst: 0.03 },
    { name: 'outputs on the GPU', ok: true, createMs: 900, runs: timed(1.5) },
    { name: 'broken', ok: false, error: 'unrecognized option | x' },
  ];

  it('sets each batch-1 median against the first row and marks wrong answers and failures', () => {
    const table = variantTable(results);
    expect(table[2]).toBe('| as served | 2.400 (2.160-2.880) | x1.00 | 4.800 (2.400-7.200) | 9.600 (7.200-12.000) | 0.030 | 900 |');
    expect(table[4]).toContain('| x0.13 |');
    expect(table[4]).toContain('| 40.000 WRONG |');
    expect(table[6]).toContain('| left on the GPU |');
    expect(table[7]).toBe('| broken | FAILED: unrecognized option \\| x | | | | | |');
  });

  it('names the fastest variant with right answers, never the probe nor a wrong one', () => {
    expect(variantSummary(results)).toBe(
      'batch 1 as served 2.400 ms; 2x64 probe 0.100 ms; fastest with right answers: no validation 1.200 ms; WRONG answers: capture; failed: broken',
    );
  });

  it('lists the server as it serves first and the probe second, as the summary reads them', () => {
    expect(variantSettings(WEBGPU_VARIANTS[0]!)).toEqual({ gpuProviders: [{ name: 'webgpu', options: {}, sources: {} }] });
    expect(WEBGPU_VARIANTS[0]!.model).toBe('mlp');
    expect(WEBGPU_VARIANTS[1]!.model).toBe('probe');
    expect(WEBGPU_VARIANTS.slice(2).every((v) => v.model === 'mlp')).toBe(true);
  });

  it("makes each variant's session as the server makes it from the same config parameters", () => {
    const named = (name: string) => WEBGPU_VARIANTS.find((v) => v.name === name)!;
    const dispatches = ortSessionOptions(variantSettings(named('max_num_pending_dispatches 1')), 'gpu', 0);
    expect(dispatches.executionProviders).toEqual([{ name: 'webgpu' }]);
    expect(dispatches.extra).toMatchObject({ ep: { webgpuexecutionprovider: { maxNumPendingDispatches: '1' } } });
    expect(ortSessionOptions(variantSettings(named('validation_mode disabled')), 'gpu', 0).executionProviders).toEqual([
      { name: 'webgpu', validationMode: 'disabled' },
    ]);
    expect(ortSessionOptions(variantSettings(named('intra-op spinning on (server default off)')), 'gpu', 0).extra).toMatchObject({
      session: { intra_op: { allow_spinning: '1' } },
    });
    expect(variantSettings(named('graph capture (fixed shapes only)')).sessionConfigEntries).toEqual({
      'ep.webgpuexecutionprovider.enableGraphCapture': '1',
    });
    // Served by the check when fastest: what a config can ask for, on the MLP.
    expect(WEBGPU_VARIANTS.filter(servable).map((v) => v.name)).toEqual([
      'validation_mode disabled',
      'validation_mode wgpuOnly',
      'storage_buffer_cache_mode simple',
      'max_num_pending_dispatches 1',
      'max_num_pending_dispatches 256',
      'intra-op spinning on (server default off)',
    ]);
  });

  it('serves the fastest servable variant with right answers, only at least 10% under the baseline', () => {
    const row = (name: string, b1: number, worst?: number): VariantResult => ({
      name,
      ok: true,
      runs: timed(b1),
      ...(worst !== undefined && { worst }),
    });
    const base = row('as the server serves it', 2.4, 0.03);
    expect(fastestServable([base, row('the 2x64 probe MLP, as served', 0.1, 0), row('validation_mode disabled', 1.2, 0.03)])?.name).toBe(
      'validation_mode disabled',
    );
    // Wrong answers, not servable, or within 10% of the baseline: none.
    expect(fastestServable([base, row('validation_mode disabled', 1.2, 3)])).toBeUndefined();
    expect(fastestServable([base, row('graph capture (fixed shapes only)', 0.3, 0)])).toBeUndefined();
    expect(fastestServable([base, row('max_num_pending_dispatches 1', 2.2, 0)])).toBeUndefined();
    expect(fastestServable([base, row('max_num_pending_dispatches 1', 2.0, 0), row('max_num_pending_dispatches 256', 1.5, 0)])?.name).toBe(
      'max_num_pending_dispatches 256',
    );
  });
});
