/**
 * A command that did not do what it was asked exits non-zero with one line on stderr that names
 * the problem, and leaves the repository as it was; none exits 0 having done nothing. Every
 * command line runs through the compiled CLI, as the image runs it, against temporary
 * repositories of generated models and, for S3, s3rver.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { identity, serializeModel } from '@batchwise/modelgen';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { visibleGpuIds } from '../packages/server/src/backends/gpu-detect.ts';
import { SERVER_VERSION } from '../packages/server/src/core/version.ts';
import { makeRepository } from './support/repository.ts';
import { startTestS3, type TestS3 } from './support/s3.ts';
import { runCli, type CliRun } from './support/cli.ts';

const S3_ENV = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' };

/** Serves version 1 of two, so version 2 can be a canary. */
const CONFIG = `name: "ident"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]
version_policy { specific { versions: [1] } }
`;
const MODEL = serializeModel(identity('FP32', [4]));
const IDENT = [{ name: 'ident', model: identity('FP32', [4]), config: CONFIG, versions: [1, 2] }];

/** `batchwise <args>` from the compiled CLI, as the image's entrypoint starts it. */
const batchwise = runCli;

/**
 * The lines on stderr that say why a command failed: commander's `error: ...` and the CLI's
 * fatal JSON line (other lines are logs and help).
 */
function failureLines(stderr: string): string[] {
  return stderr.split('\n').flatMap((line) => {
    if (line.startsWith('error: ')) return [line.slice('error: '.length)];
    if (!line.startsWith('{')) return [];
    const parsed = JSON.parse(line) as { level?: unknown; msg?: string };
    return parsed.level === 'fatal' ? [parsed.msg!] : [];
  });
}

/** Exit status 1 and exactly one line on stderr naming the problem; stdout as given (by default nothing). */
function expectFailure(run: CliRun, message: RegExp, stdout: RegExp = /^$/): void {
  expect({ code: run.code, failure: failureLines(run.stderr) }, run.stderr).toEqual({ code: 1, failure: [expect.stringMatching(message)] });
  expect(run.stdout).toMatch(stdout);
}

/** Every file of a folder with a hash of its contents: a failed command must leave it the same. */
async function contentsOf(dir: string): Promise<Record<string, string>> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files: Record<string, string> = {};
  for (const entry of entries.filter((e) => e.isFile())) {
    const path = join(entry.parentPath, entry.name);
    files[relative(dir, path)] = createHash('sha256')
      .update(await readFile(path))
      .digest('hex');
  }
  return files;
}

/** A repository of its own, for a command that changes it. */
async function withOwnRepository(use: (dir: string) => Promise<void>): Promise<void> {
  const own = await makeRepository(IDENT);
  try {
    await use(own.dir);
  } finally {
    await own.remove();
  }
}

let work: string;
let repo: { dir: string; remove(): Promise<void> };
let artifact: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'batchwise-cli-exit-'));
  repo = await makeRepository(IDENT);
  artifact = join(work, 'model.onnx');
  await writeFile(artifact, MODEL);
  await writeFile(join(work, 'wrong-dims.onnx'), serializeModel(identity('FP32', [5])));
});

afterAll(async () => {
  await repo?.remove();
  await rm(work, { recursive: true, force: true });
});

describe('the command lines as the docs write them', () => {
  it('models canary <model> --version 2 --weight 20 starts the canary (issue 26: it printed the program version and exited 0)', async () => {
    await withOwnRepository(async (own) => {
      const run = await batchwise(['models', 'canary', 'ident', '--version', '2', '--weight', '20', '--model-repository', own]);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toBe("canary of 'ident': version 2 at 20%, version 1 at 80%\n");
      expect(JSON.parse(await readFile(join(own, 'ident', 'canary.json'), 'utf8'))).toMatchObject({
        stable_version: '1',
        canary_version: '2',
        canary_weight: 20,
      });
    });
  });

  it('--version before any command prints the version', async () => {
    expect(await batchwise(['--version'])).toMatchObject({ code: 0, stdout: `${SERVER_VERSION}\n` });
  });
});

// Each case is a process of its own that waits mostly on module loading: they run side by side.
describe.concurrent('a command that cannot do what it was asked exits 1, names the problem on stderr and changes nothing', () => {
  const r = () => ['--model-repository', repo.dir];
  /** Name, arguments, the message, and what stdout holds (by default nothing). */
  const cases: [string, () => string[], RegExp, RegExp?][] = [
    // The program and its groups.
    ['no command', () => [], /^'batchwise' needs a command: serve, doctor, models or tune$/],
    ['models without a subcommand', () => ['models'], /^'batchwise models' needs a command: promote, rollback, canary or list$/],
    ['an unknown command', () => ['deploy'], /^unknown command 'deploy'$/],
    ['an unknown models subcommand', () => ['models', 'delete'], /^unknown command 'delete'$/],
    ['an unknown option', () => ['models', 'list', ...r(), '--all'], /^unknown option '--all'$/],
    ["the program's -V after a command", () => ['models', 'list', ...r(), '-V'], /^unknown option '-V'$/],
    ['an argument too many', () => ['models', 'list', ...r(), '--json', 'true'], /^too many arguments for 'list'/],
    // serve (a server that starts and then fails exits 1 too).
    ['serve without a repository', () => ['serve'], /^required option '--model-repository <path>' not specified$/],
    ['serve with a port out of range', () => ['serve', ...r(), '--http-port', '70000'], /'--http-port <port>' argument '70000' is invalid/],
    ['serve with a level that is no number', () => ['serve', ...r(), '--log-verbose', 'lots'], /'--log-verbose <level>' argument 'lots'/],
    [
      'serve with a model memory limit that is no byte count (before it listens)',
      () => ['serve', ...r(), '--model-memory-limit', '12X', '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0'],
      /--model-memory-limit must be a number of bytes above 0 \(e\.g\. 8589934592, 8G, 512Mi\), got '12X'/,
    ],
    [
      'serve a repository that does not exist',
      () => ['serve', '--model-repository', join(work, 'nowhere'), '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0'],
      /no such file or directory.*nowhere/,
      /"msg":"listening; loading models"/,
    ],
    // models list
    ['list an unknown model', () => ['models', 'list', ...r(), '--model', 'nope'], /^model 'nope' not found in /],
    ['list a repository that does not exist', () => ['models', 'list', '--model-repository', join(work, 'nowhere')], /nowhere/],
    // models promote
    [
      'promote an unknown model',
      () => ['models', 'promote', ...r(), '--model', 'nope', '--file', artifact],
      /^model 'nope' has no config.pbtxt/,
    ],
    ['promote without --file', () => ['models', 'promote', ...r(), '--model', 'ident'], /^required option '--file <model.onnx>'/],
    [
      'promote a file that is not there',
      () => ['models', 'promote', ...r(), '--model', 'ident', '--file', join(work, 'no.onnx')],
      /no\.onnx/,
    ],
    [
      'promote an artifact that does not match the config',
      () => ['models', 'promote', ...r(), '--model', 'ident', '--file', join(work, 'wrong-dims.onnx')],
      /does not match the config of 'ident'/,
    ],
    [
      'promote --wait without --server-url (it used to promote first, then say so)',
      () => ['models', 'promote', ...r(), '--model', 'ident', '--file', artifact, '--wait'],
      /^--wait needs --server-url <url>$/,
    ],
    [
      'promote --server-url without --wait (nothing would wait)',
      () => ['models', 'promote', ...r(), '--model', 'ident', '--file', artifact, '--server-url', 'http://127.0.0.1:8000'],
      /^--server-url is read only with --wait$/,
    ],
    [
      'promote --wait with an empty --server-url',
      () => ['models', 'promote', ...r(), '--model', 'ident', '--file', artifact, '--wait', '--server-url', ''],
      /'--server-url <url>' argument '' is invalid/,
    ],
    // models rollback
    [
      'roll back with nothing to roll back to',
      () => ['models', 'rollback', ...r(), '--model', 'ident'],
      /^model 'ident' has no promotion history/,
    ],
    [
      'roll back to a version not there',
      () => ['models', 'rollback', ...r(), '--model', 'ident', '--to', '9'],
      /version 9: it is no longer in/,
    ],
    ['roll back to the version serving', () => ['models', 'rollback', ...r(), '--model', 'ident', '--to', '1'], /already serves version 1/],
    [
      'roll back with --api-key-header but no --wait',
      () => ['models', 'rollback', ...r(), '--model', 'ident', '--api-key-header', 'k'],
      /--wait/,
    ],
    // models canary
    [
      'canary without its model',
      () => ['models', 'canary', '--version', '2', '--weight', '20', ...r()],
      /^missing required argument 'model'$/,
    ],
    [
      'canary with neither --version nor --file',
      () => ['models', 'canary', 'ident', '--weight', '20', ...r()],
      /needs --version <n> or --file/,
    ],
    [
      'canary with both --version and --file',
      () => ['models', 'canary', 'ident', '--version', '2', '--file', artifact, '--weight', '20', ...r()],
      /^--version and --file cannot be given together$/,
    ],
    [
      'canary with neither --weight nor --steps',
      () => ['models', 'canary', 'ident', '--version', '2', ...r()],
      /needs --weight <percent> or --steps/,
    ],
    [
      'canary with both --weight and --steps',
      () => ['models', 'canary', 'ident', '--version', '2', '--weight', '5', '--steps', '5,100', '--region', 'us-east-1', ...r()],
      /^--weight and --steps cannot be given together$/,
    ],
    [
      'canary --steps with nothing to watch',
      () => ['models', 'canary', 'ident', '--version', '2', '--steps', '5,100', ...r()],
      /^--steps needs --metrics-url <url> or --region <region>$/,
    ],
    [
      'canary watching both metrics endpoints and CloudWatch',
      () => [
        'models',
        'canary',
        'ident',
        '--version',
        '2',
        '--steps',
        '5,100',
        '--metrics-url',
        'http://127.0.0.1:8002/metrics',
        '--region',
        'us-east-1',
        ...r(),
      ],
      /^option '--region <region>' cannot be used with option '--metrics-url <url>'$/,
    ],
    [
      'canary --interval without --steps (nothing is watched)',
      () => ['models', 'canary', 'ident', '--version', '2', '--weight', '5', '--interval', '1m', ...r()],
      /^--interval is read only with --steps <weights>$/,
    ],
    [
      'canary --file with steps that go down (refused before the upload)',
      () => ['models', 'canary', 'ident', '--file', artifact, '--steps', '50,5', '--region', 'us-east-1', ...r()],
      /--steps must increase/,
    ],
    [
      'canary of a version not there',
      () => ['models', 'canary', 'ident', '--version', '9', '--weight', '20', ...r()],
      /^model 'ident' has no version 9/,
    ],
    [
      'canary of the version serving',
      () => ['models', 'canary', 'ident', '--version', '1', '--weight', '20', ...r()],
      /already serves version 1/,
    ],
    [
      'canary of an unknown model',
      () => ['models', 'canary', 'nope', '--version', '2', '--weight', '20', ...r()],
      /^model 'nope' has no config/,
    ],
    [
      'canary with a threshold the servers would refuse',
      () => ['models', 'canary', 'ident', '--version', '2', '--weight', '20', '--max-p99-ratio', '0.5', ...r()],
      /rollback.max_p99_ratio must be between 1 and/,
    ],
    // doctor
    [
      'doctor with an AMI family it does not know',
      () => ['doctor', '--ami-family', 'al1'],
      /'--ami-family <family>' argument 'al1' is invalid/,
    ],
    // tune
    ['tune without an objective', () => ['tune', ...r(), '--model', 'ident'], /^required option '--latency-objective <duration>'/],
    ['tune with an objective without a unit', () => ['tune', ...r(), '--model', 'ident', '--latency-objective', '50'], /got '50'/],
    ['tune an unknown model', () => ['tune', ...r(), '--model', 'nope', '--latency-objective', '50ms'], /^model 'nope' is not in /],
  ];

  it.each(cases)('%s', async (_name, args, message, stdout) => {
    const before = await contentsOf(repo.dir);
    expectFailure(await batchwise(args()), message, stdout);
    expect(await contentsOf(repo.dir)).toEqual(before);
  });

  it('models promote whose upload fails (a file where the version folder goes)', async () => {
    await withOwnRepository(async (own) => {
      await writeFile(join(own, 'ident', '3'), 'in the way');
      const run = await batchwise(['models', 'promote', '--model-repository', own, '--model', 'ident', '--file', artifact]);
      expectFailure(run, /^uploading .*model\.onnx as version 3 of 'ident' to .* failed: version 3 of 'ident' already exists/);
      expect(await readFile(join(own, 'ident', 'config.pbtxt'), 'utf8')).toBe(CONFIG);
    });
  });

  it('models promote --wait on a server that never serves the version: promoted, then exits 1 saying it timed out', async () => {
    await withOwnRepository(async (own) => {
      const run = await batchwise([
        'models',
        'promote',
        '--model-repository',
        own,
        '--model',
        'ident',
        '--file',
        artifact,
        '--wait',
        '--server-url',
        'http://127.0.0.1:9',
        '--wait-timeout-secs',
        '1',
        '--wait-interval-secs',
        '1',
      ]);
      expectFailure(run, /^timed out waiting for http:\/\/127\.0\.0\.1:9.* to report only version 3/);
    });
  });

  it('models canary --steps whose canary is never judged healthy: weight 0, exit 1 with the reason', async () => {
    const metrics = createServer((_req, res) => void res.end('# no canary traffic\n'));
    await new Promise<void>((resolve) => metrics.listen(0, '127.0.0.1', resolve));
    await withOwnRepository(async (own) => {
      const url = `http://127.0.0.1:${(metrics.address() as { port: number }).port}/metrics`;
      const run = await batchwise([
        'models',
        'canary',
        'ident',
        '--version',
        '2',
        '--steps',
        '50,100',
        '--interval',
        '50ms',
        '--metrics-url',
        url,
        '--model-repository',
        own,
      ]);
      expectFailure(
        run,
        /^canary version 2 of 'ident' rolled back at 50%: not judged after 3 intervals/,
        /canary rolled back \(weight 0\)/,
      );
      expect(JSON.parse(await readFile(join(own, 'ident', 'canary.json'), 'utf8'))).toMatchObject({ canary_weight: 0 });
    }).finally(() => metrics.close());
  });

  it('tune that finds no config within the objective: the nearest on stdout, exit 1 naming it and the miss', async () => {
    const out = join(work, 'tune-out');
    const run = await batchwise([
      'tune',
      '--model-repository',
      repo.dir,
      '--model',
      'ident',
      '--latency-objective',
      '1us',
      '--max-candidates',
      '1',
      '--concurrency',
      '1',
      '--window-ms',
      '100',
      '--max-windows',
      '1',
      '--out',
      out,
    ]);
    expectFailure(
      run,
      /^no configuration kept p99 within 0\.001ms: the nearest, cpu .+?, missed it by [\d.]+ ms \(\d+% over\) \(report: .*report\.md\)$/,
      /^nearest: cpu .+? — [\d.]+ infer\/s at p99 [\d.]+ ms \(concurrency 1\) misses the 0\.001ms objective by [\d.]+ ms \(\d+% over\); .*\nwhy: .*\n {2}at that point: client p50 .*\n(?:warning: .*\n)*the current config is already the nearest one\n/,
    );
  });

  describe('doctor', () => {
    it.skipIf(visibleGpuIds().length > 0)('expecting a GPU on a host without one', async () => {
      const run = await batchwise(['doctor', '--expect-gpu']);
      expectFailure(run, /^doctor: required check\(s\) failed: gpu-visible, cuda-execution-provider$/, /FAIL {2}gpu-visible/);
    });

    it('a repository that does not exist, or holds no model', async () => {
      const empty = join(work, 'empty');
      await mkdir(empty, { recursive: true });
      for (const [location, detail] of [
        [join(work, 'nowhere'), /cannot list .*nowhere/],
        [empty, /no model folders found/],
      ] as const) {
        const run = await batchwise(['doctor', '--model-repository', location]);
        expectFailure(run, /^doctor: required check\(s\) failed: model-repository$/, detail);
      }
    });

    it('passes a repository it can list, and says which models it found (exit 0: it did what it was asked)', async () => {
      const run = await batchwise(['doctor', '--model-repository', repo.dir]);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toMatch(/ok {4}model-repository +.*: 1 model folder\(s\): ident/);
    });
  });
});

describe('against S3 (s3rver)', () => {
  let s3: TestS3;
  let proxy: Server;
  let proxied: string;

  beforeAll(async () => {
    s3 = await startTestS3(join(work, 's3'));
    await s3.put('prod/ident/config.pbtxt', CONFIG);
    await s3.put('prod/ident/1/model.onnx', MODEL);
    await s3.put('prod/ident/2/model.onnx', MODEL);
    // The same bucket through a gateway that refuses uploads of model versions, as a role without s3:PutObject would.
    proxy = createServer((req, res) => {
      if (req.method === 'PUT' && /\/ident\/\d+\/model\.onnx/.test(req.url ?? '')) {
        req.resume();
        res
          .writeHead(403, { 'content-type': 'application/xml' })
          .end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>');
        return;
      }
      const upstream = request({ host: '127.0.0.1', port: s3.port, method: req.method, path: req.url, headers: req.headers }, (reply) => {
        res.writeHead(reply.statusCode!, reply.headers);
        reply.pipe(res);
      });
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    proxied = `s3://127.0.0.1:${(proxy.address() as { port: number }).port}/models/prod`;
  });

  afterAll(async () => {
    proxy?.close();
    await s3?.close();
  });

  it('models promote whose upload S3 refuses', async () => {
    const run = await batchwise(['models', 'promote', '--model-repository', proxied, '--model', 'ident', '--file', artifact], S3_ENV);
    expectFailure(run, /^uploading .*model\.onnx as version 3 of 'ident' to s3:\/\/.* failed: Access Denied$/);
  });

  it.each([
    [
      'models list of a bucket that does not exist',
      ['models', 'list', '--model-repository', 's3://127.0.0.1:PORT/nobucket/prod'],
      /bucket/i,
    ],
    [
      'models canary of a version not there',
      ['models', 'canary', 'ident', '--version', '7', '--weight', '5', '--model-repository', 'REPO'],
      /no version 7/,
    ],
    [
      'models rollback with nothing to roll back to',
      ['models', 'rollback', '--model', 'ident', '--model-repository', 'REPO'],
      /no promotion history/,
    ],
  ])('%s', async (_name, args, message) => {
    const resolved = args.map((a) => a.replace('PORT', String(s3.port)).replace('REPO', s3.location('prod')));
    expectFailure(await batchwise(resolved, S3_ENV), message);
  });

  it('doctor lists an s3:// repository in the forms the server takes, and fails one it cannot list', async () => {
    const ok = await batchwise(['doctor', '--model-repository', s3.location('prod')], S3_ENV);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/ok {4}model-repository +s3:\/\/.*: 1 model folder\(s\): ident/);
    const missing = await batchwise(['doctor', '--model-repository', `s3://127.0.0.1:${s3.port}/nobucket/prod`], S3_ENV);
    expectFailure(missing, /^doctor: required check\(s\) failed: model-repository$/, /FAIL {2}model-repository/);
  });
});
