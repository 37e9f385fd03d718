import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpClient } from '@batchwise/client';
import { mlp, serializeModel } from '@batchwise/modelgen';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { pino } from 'pino';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsCommand } from '../packages/server/src/cli/models/index.ts';
import { tuneCommand, type TuneResult } from '../packages/server/src/cli/tune/index.ts';
import { parseModelConfig } from '../packages/server/src/config/index.ts';
import { readConfigWithHistory } from '../packages/server/src/promotion/promotion-history.ts';
import { openRepositoryStore } from '../packages/server/src/promotion/repository-store.ts';

/**
 * The current config waits 400 ms for a batch of 8 that concurrency 1 and 2 never fill (the
 * adaptive delay off: Triton's wait-it-out semantics), so its p99 is at least the delay, past
 * the 300 ms objective: a candidate with a short delay must win, and the recommendation differs
 * from the current config whatever the machine's speed. Windows of 500 ms hold at least one of
 * its responses.
 */
const CONFIG = `name: "tiny"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [16] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [16] }]
dynamic_batching { max_queue_delay_microseconds: 400000 }
parameters { key: "batchwise_adaptive_queue_delay" value: { string_value: "false" } }
`;
const MODEL = Buffer.from(serializeModel(mlp({ layers: 1, width: 16 })));
/** Smoke mode: short windows, two concurrencies, a few candidates. */
const SMOKE = ['--latency-objective', '300ms', '--budget', '3m', '--concurrency', '1,2', '--window-ms', '500', '--max-windows', '1'];

/** `tiny` in `repository`, tuned in smoke mode over two candidates with --apply, the report in `out`; `extra` flags win. */
const applySmoke = (repository: string, out: string, ...extra: string[]) => [
  '--model-repository',
  repository,
  '--model',
  'tiny',
  ...SMOKE,
  '--max-candidates',
  '2',
  '--out',
  out,
  '--apply',
  ...extra,
];

type Command = ReturnType<typeof tuneCommand>;

async function runCli(command: Command, args: readonly string[]): Promise<{ out: string; error?: Error }> {
  let out = '';
  let err = '';
  command.exitOverride().configureOutput({ writeOut: (s) => void (out += s), writeErr: (s) => void (err += s) });
  command.commands.forEach((c) => c.exitOverride().configureOutput({ writeOut: (s) => void (out += s), writeErr: (s) => void (err += s) }));
  try {
    await command.parseAsync(args, { from: 'user' });
    return { out };
  } catch (error) {
    return { out, error: new Error(`${(error as Error).message} ${err}`.trim()) };
  }
}

const tune = (args: readonly string[]) => {
  let out = '';
  const command = tuneCommand({ write: (t) => void (out += t) });
  return runCli(command, args).then((r) => ({ ...r, out: out + r.out }));
};

const readReport = async (out: string): Promise<TuneResult> => JSON.parse(await readFile(join(out, 'report.json'), 'utf8')) as TuneResult;

describe('batchwise tune (smoke mode, real servers)', () => {
  let root: string;
  let repo: string;

  /** A repository of its own holding `tiny` with CONFIG. */
  const makeRepo = async (name: string): Promise<string> => {
    const dir = join(root, name);
    await mkdir(join(dir, 'tiny', '1'), { recursive: true });
    await writeFile(join(dir, 'tiny', 'config.pbtxt'), CONFIG);
    await writeFile(join(dir, 'tiny', '1', 'model.onnx'), MODEL);
    return dir;
  };

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'batchwise-tune-'));
    repo = await makeRepo('repo');
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('writes a consistent report, a recommended config a server loads, and --apply writes it into the repository', async () => {
    const out = join(root, 'out-local');
    const { out: printed, error } = await tune(applySmoke(repo, out));
    expect(error).toBeUndefined();

    const report = await readReport(out);
    expect(report.runs.length).toBeLessThanOrEqual(2);
    expect(report.runs[0]!.stage).toBe('current');
    expect(report.runs[0]!.knobs.maxQueueDelayUs).toBe(400_000);
    for (const level of report.runs[0]!.levels) expect(level.p99Ms).toBeGreaterThanOrEqual(400);
    expect(report.currentConfigText).toBe(CONFIG);
    const rec = report.recommendation!;
    expect(rec.point.p99Ms).toBeLessThanOrEqual(300);
    const winner = report.runs.find((r) => r.id === rec.point.candidate)!;
    expect(winner.stage).not.toBe('current');
    expect(winner.levels).toContainEqual(expect.objectContaining({ concurrency: rec.point.concurrency, throughput: rec.point.throughput }));
    expect(rec.withinObjective).toBe(true);
    expect(report.miss).toBeUndefined();
    // Beside the client's figures, the server's (its statistics over the same windows) and the CPU (Linux /proc).
    for (const level of report.runs.flatMap((r) => r.levels)) {
      expect(level.server!.requests).toBeGreaterThan(0);
      expect(level.server!.avgRequestMs).toBeGreaterThan(0);
      const cores = expect.any(Number);
      expect(level.cpu).toEqual({ generatorCores: cores, serverCores: cores, otherCores: cores, cores: cpus().length });
    }
    // The current config's requests wait out the 400 ms delay in the server's queue.
    expect(report.runs[0]!.levels[0]!.server!.avgQueueMs).toBeGreaterThanOrEqual(300);
    // The front holds the recommendation's point or one that dominates it on p99 alone.
    expect(report.front.some((p) => p.p99Ms <= rec.point.p99Ms)).toBe(true);

    const recommended = await readFile(join(out, 'recommended.config.pbtxt'), 'utf8');
    expect(recommended).toBe(report.recommendedConfigText);
    expect(parseModelConfig(recommended).dynamic_batching?.max_queue_delay_microseconds).toBe(winner.knobs.maxQueueDelayUs);
    const markdown = await readFile(join(out, 'report.md'), 'utf8');
    for (const run of report.runs) expect(markdown).toContain(`\`${run.id}\``);
    const svg = await readFile(join(out, 'pareto.svg'), 'utf8');
    expect(svg).toMatch(/^<svg /);
    expect(svg).toContain('objective 300ms');
    expect(svg).toContain('recommended');

    // The diff printed is the recommended config against the current one.
    expect(printed).toContain('-  max_queue_delay_microseconds: 400000');
    expect(printed).toContain(`+  max_queue_delay_microseconds: ${winner.knobs.maxQueueDelayUs}`);
    expect(printed).toContain(`recommended: ${rec.point.candidate}`);
    expect(printed).toMatch(
      /^ {2}at that point: client p50 [\d.]+ \/ p99 [\d.]+ ms; in the server [\d.]+ ms per request \(of which queue /m,
    );

    // --apply: the repository now holds the recommendation; the previous config is kept beside the report.
    expect(await readFile(join(repo, 'tiny', 'config.pbtxt'), 'utf8')).toBe(recommended);
    expect(await readFile(join(out, 'current.config.pbtxt'), 'utf8')).toBe(CONFIG);
    expect(printed).toContain(`wrote ${join(repo, 'tiny', 'config.pbtxt')}`);

    // A real server loads the applied config and serves the model.
    const server = await startServerProcess(['--model-repository', repo]);
    const client = new HttpClient({ url: server.httpUrl });
    try {
      expect(await client.isModelReady('tiny')).toBe(true);
      const result = await client.infer({
        model: 'tiny',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: new Float32Array(16) }],
      });
      expect(result.outputs[0]!.shape).toEqual([1, 16]);
    } finally {
      await client.close();
      await server.stop();
    }
  }, 240_000);

  it('when no config meets the objective: recommends the nearest, says by how much it missed and why, applies nothing and fails', async () => {
    const own = await makeRepo('repo-nearest');
    const out = join(root, 'out-nearest');
    const { out: printed, error } = await tune(applySmoke(own, out, '--latency-objective', '1us', '--concurrency', '1'));

    const report = await readReport(out);
    const rec = report.recommendation!;
    const winner = report.runs.find((r) => r.id === rec.point.candidate)!;
    // The nearest is the lowest p99 measured: not the current config, which waits 400 ms for a batch.
    expect(rec.withinObjective).toBe(false);
    expect(winner.stage).not.toBe('current');
    expect(rec.point.p99Ms).toBe(Math.min(...report.runs.flatMap((r) => r.levels.map((l) => l.p99Ms))));
    expect(rec.reason).toMatch(/^no point had p99 within 0\.001 ms; this one is the nearest, the lowest p99 measured/);
    const miss = report.miss!;
    expect(miss.byMs).toBeCloseTo(rec.point.p99Ms - 0.001, 6);
    // Why, from the server's own figures: even its mean time per request is past 1 us.
    expect(miss.why).toMatch(
      /^the server itself took longer than 0\.001ms: [\d.]+ ms per request \(of which queue [\d.]+, compute [\d.]+\), p99 (?:at most [\d.]+|[\d.]+-[\d.]+) ms, mean batch [\d.]+; most of it .*\. The load generator used [\d.]+ of the host's \d+ cores beside the server's [\d.]+/,
    );

    // Exit status 1 naming the nearest and the miss; --apply wrote nothing.
    expect(error?.message).toMatch(
      new RegExp(
        `^no configuration kept p99 within 0\\.001ms: the nearest, ${rec.point.candidate}, missed it by [\\d.]+ ms \\(\\d+% over\\); nothing applied \\(report: .*report\\.md\\)$`,
      ),
    );
    expect(await readFile(join(own, 'tiny', 'config.pbtxt'), 'utf8')).toBe(CONFIG);
    await expect(readFile(join(out, 'current.config.pbtxt'))).rejects.toThrow(/ENOENT/);

    // The summary, the report and the plot say it; the nearest config is there to apply by hand.
    expect(printed).toContain(`nearest: ${rec.point.candidate} — `);
    expect(printed).toContain(`misses the 0.001ms objective by `);
    expect(printed).toContain(`why: ${miss.why}`);
    expect(printed).toContain(`+  max_queue_delay_microseconds: ${winner.knobs.maxQueueDelayUs}`);
    expect(await readFile(join(out, 'recommended.config.pbtxt'), 'utf8')).toBe(report.recommendedConfigText);
    const markdown = await readFile(join(out, 'report.md'), 'utf8');
    expect(markdown).toContain(`**No configuration kept p99 within 0.001ms. Nearest: \`${rec.point.candidate}\`**`);
    expect(markdown).toContain(`Why: ${miss.why}`);
    expect(await readFile(join(out, 'pareto.svg'), 'utf8')).toContain('nearest: ');
  }, 240_000);

  it('refuses bad flags with a message naming the problem', async () => {
    const bad = await tune(['--model-repository', repo, '--model', 'tiny', '--latency-objective', '50xs']);
    expect(bad.error?.message).toMatch(/--latency-objective: expected a positive duration with a unit .* got '50xs'/);
    const bare = await tune(['--model-repository', repo, '--model', 'tiny', '--latency-objective', '50']);
    expect(bare.error?.message).toMatch(/got '50'/);
    const missing = await tune(['--model-repository', repo, '--model', 'nope', '--latency-objective', '50ms']);
    expect(missing.error?.message).toBe(`model 'nope' is not in ${repo} (models there: tiny)`);
    const concurrency = await tune(['--model-repository', repo, '--model', 'tiny', '--latency-objective', '50ms', '--concurrency', '1,x']);
    expect(concurrency.error?.message).toMatch(/expected rising positive integers/);
  });
});

describe('batchwise tune --apply on an S3 repository (s3rver)', () => {
  let root: string;
  let s3: S3rver;
  let location: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'batchwise-tune-s3-'));
    await mkdir(join(root, 's3'));
    s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: join(root, 's3'), configureBuckets: [{ name: 'models' }] });
    const { port } = (await s3.run()) as { port: number };
    process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
    process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
    process.env.AWS_REGION = 'us-east-1';
    location = `s3://127.0.0.1:${port}/models/prod`;
    const store = openRepositoryStore(location, { logger: pino({ level: 'silent' }) });
    const local = join(root, 'model.onnx');
    await writeFile(local, MODEL);
    await store.uploadVersion('tiny', 1, 'model.onnx', local, pino({ level: 'silent' }));
    const { S3Client, PutObjectCommand } = await import('@aws-sdk/client-s3');
    const client = new S3Client({ endpoint: `http://127.0.0.1:${port}`, forcePathStyle: true, region: 'us-east-1' });
    await client.send(new PutObjectCommand({ Bucket: 'models', Key: 'prod/tiny/config.pbtxt', Body: CONFIG }));
    client.destroy();
  });
  afterAll(async () => {
    await s3.close();
    await rm(root, { recursive: true, force: true });
  });

  it('writes nothing to S3 and prints the models promote command that ships the recommendation', async () => {
    const out = join(root, 'out');
    const { out: printed, error } = await tune(applySmoke(location, out));
    expect(error).toBeUndefined();
    const store = openRepositoryStore(location, { logger: pino({ level: 'silent' }) });
    expect((await store.readConfig('tiny'))!.text).toBe(CONFIG);

    const line = printed.split('\n').find((l) => l.includes('models promote'))!;
    const recommended = join(out, 'recommended.config.pbtxt');
    expect(line.trim()).toMatch(
      new RegExp(
        `^pnpm batchwise models promote --model-repository ${location} --model tiny --file ${join(out, 'model.onnx')} --config ${recommended} --message '`,
      ),
    );
    // Running the printed command ships the recommended config with the model as version 2.
    const words = [...line.trim().matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!);
    const models = modelsCommand({ write: () => undefined, logger: pino({ level: 'silent' }) });
    const shipped = await runCli(models, words.slice(3));
    expect(shipped.error).toBeUndefined();
    const config = readConfigWithHistory((await store.readConfig('tiny'))!.text).config;
    expect(config.version_policy).toEqual({ specific: { versions: [2] } });
    const wanted = parseModelConfig(await readFile(recommended, 'utf8'));
    expect(config.dynamic_batching).toEqual(wanted.dynamic_batching);
    expect(config.dynamic_batching?.max_queue_delay_microseconds).not.toBe(400_000);
  }, 240_000);
});
