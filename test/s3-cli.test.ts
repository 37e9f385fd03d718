/**
 * The `models` commands against an S3 repository, from an empty bucket, as a newcomer runs them
 * (issue 35): the compiled CLI, s3rver on 127.0.0.1 and a real server in poll mode in a child
 * process. Without credentials every command says what to set, in one line; no command prints the
 * AWS SDK's Node version warning; `models promote --config` creates a model the repository does not
 * have; `--wait` says each answer that reports the new version, --wait-interval-secs apart.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { identity, serializeModel } from '@batchwise/modelgen';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseModelConfig } from '../packages/server/src/config/index.ts';
import { readConfigWithHistory } from '../packages/server/src/promotion/promotion-history.ts';
import { startChildServer, type ChildServer } from './support/child-server.ts';
import { runCli, type CliRun } from './support/cli.ts';
import { identityConfig } from './support/repository.ts';
import { S3_BUCKET, startTestS3, type TestS3 } from './support/s3.ts';
import { postJson } from './support/server.ts';
import { waitFor } from './support/wait-for.ts';

const S3RVER_KEYS = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' };

/** No credential anywhere the SDK's default chain looks (and no instance metadata service to wait for). */
const NO_CREDENTIALS = {
  AWS_ACCESS_KEY_ID: undefined,
  AWS_SECRET_ACCESS_KEY: undefined,
  AWS_SESSION_TOKEN: undefined,
  AWS_PROFILE: undefined,
  AWS_WEB_IDENTITY_TOKEN_FILE: undefined,
  AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: undefined,
  AWS_CONTAINER_CREDENTIALS_FULL_URI: undefined,
  AWS_CONFIG_FILE: '/nonexistent/aws-config',
  AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
  AWS_EC2_METADATA_DISABLED: 'true',
  AWS_REGION: 'us-east-1',
};

interface LogLine {
  readonly level?: number | string;
  readonly time?: number;
  readonly msg?: string;
  readonly [key: string]: unknown;
}

/** stderr as JSON lines; a line that is not JSON (a Node warning, a library's own print) fails the test. */
function stderrLines(run: CliRun): LogLine[] {
  return run.stderr
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as LogLine;
      } catch {
        throw new Error(`a line on stderr that is not one of the CLI's JSON lines: ${line}\n${run.stderr}`);
      }
    });
}

let work: string;
let s3: TestS3;
let location: string;
const files: Record<string, string> = {};

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'batchwise-s3-cli-'));
  s3 = await startTestS3(join(work, 's3'));
  location = s3.location('prod');
  const write = async (name: string, bytes: Uint8Array | string) => {
    files[name] = join(work, name);
    await writeFile(files[name]!, bytes);
  };
  await write('v1.onnx', serializeModel(identity('FP32', [4])));
  await write('v2.onnx', serializeModel(identity('FP32', [4])));
  await write('wrong-dims.onnx', serializeModel(identity('FP32', [5])));
  await write('config.pbtxt', identityConfig('ident', 'dynamic_batching { }'));
});

afterAll(async () => {
  await s3?.close();
  await rm(work, { recursive: true, force: true });
});

const keys = async () =>
  ((await s3.client.send(new ListObjectsV2Command({ Bucket: S3_BUCKET, Prefix: 'prod/' }))).Contents ?? []).map((o) => o.Key).sort();
const object = async (key: string) =>
  Buffer.from(await (await s3.client.send(new GetObjectCommand({ Bucket: S3_BUCKET, Key: key }))).Body!.transformToByteArray());

describe.concurrent('without credentials, every S3 command says what to set, in one line', () => {
  const commands: [string, () => string[]][] = [
    ['models list', () => ['models', 'list', '--model-repository', location]],
    ['models promote', () => ['models', 'promote', '--model-repository', location, '--model', 'ident', '--file', files['v1.onnx']!]],
    ['models rollback', () => ['models', 'rollback', '--model-repository', location, '--model', 'ident']],
    ['models canary', () => ['models', 'canary', 'ident', '--version', '2', '--weight', '10', '--model-repository', location]],
  ];
  it.each(commands)('%s against an S3-compatible server: its key pair', async (_name, args) => {
    const run = await runCli(args(), NO_CREDENTIALS);
    expect(run.code).toBe(1);
    expect(stderrLines(run).map((l) => l.msg)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^no credentials for s3://127\\.0\\.0\\.1:${s3.port}/models/prod: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to the ` +
            `access key pair the S3-compatible server at http://127\\.0\\.0\\.1:${s3.port} was started with \\(or AWS_PROFILE .*\\) ` +
            '\\(AWS SDK: Could not load credentials from any providers\\)$',
        ),
      ),
    ]);
  });

  it('models list against AWS S3: the variables, a profile, or a role', async () => {
    const run = await runCli(['models', 'list', '--model-repository', 's3://my-models/prod'], NO_CREDENTIALS);
    expect(run.code).toBe(1);
    expect(stderrLines(run).map((l) => l.msg)).toEqual([
      expect.stringMatching(
        /^no AWS credentials for s3:\/\/my-models\/prod: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY .*, or AWS_PROFILE to a profile of ~\/\.aws\/config .*; on ECS or EC2 the task or instance role provides them \(AWS SDK: Could not load credentials from any providers\)$/,
      ),
    ]);
  });
});

describe('from an empty bucket: create a model, serve it, promote a new version and wait for it', () => {
  let server: ChildServer | undefined;
  afterAll(async () => {
    server?.process.kill('SIGTERM');
    await server?.exited;
  });

  it('models promote without --config says how to create the model, and writes nothing', async () => {
    const run = await runCli(
      ['models', 'promote', '--model-repository', location, '--model', 'ident', '--file', files['v1.onnx']!],
      S3RVER_KEYS,
    );
    expect(run.code).toBe(1);
    expect(stderrLines(run).at(-1)!.msg).toMatch(/^model 'ident' has no config\.pbtxt in .*models promote --config <config\.pbtxt>/);
    expect(await keys()).toEqual([]);
  });

  it('models promote --config refuses an artifact that does not match that config, and writes nothing', async () => {
    const args = ['models', 'promote', '--model-repository', location, '--model', 'ident'];
    const run = await runCli([...args, '--file', files['wrong-dims.onnx']!, '--config', files['config.pbtxt']!], S3RVER_KEYS);
    expect(run.code).toBe(1);
    expect(stderrLines(run).at(-1)!.msg).toMatch(/does not match the config of 'ident'/);
    expect(await keys()).toEqual([]);
  });

  it('models promote --config creates the model: version 1 and a config.pbtxt that serves it, with its history; a server polling serves it', async () => {
    server = await startChildServer(
      ['--model-repository', location, '--model-control-mode', 'poll', '--repository-poll-secs', '1'],
      S3RVER_KEYS,
    );
    const run = await runCli(
      [
        'models',
        'promote',
        '--model-repository',
        location,
        '--model',
        'ident',
        '--file',
        files['v1.onnx']!,
        '--config',
        files['config.pbtxt']!,
        '--actor',
        'newcomer',
      ],
      S3RVER_KEYS,
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe("promoted 'ident': now serving version 1 (was none)\n");
    stderrLines(run);
    expect(await keys()).toEqual(['prod/ident/1/model.onnx', 'prod/ident/config.pbtxt']);
    expect((await object('prod/ident/1/model.onnx')).equals(serializeModel(identity('FP32', [4])))).toBe(true);
    const stored = readConfigWithHistory((await object('prod/ident/config.pbtxt')).toString('utf8'));
    expect(stored.config).toMatchObject({
      name: 'ident',
      max_batch_size: 8,
      dynamic_batching: {},
      version_policy: { specific: { versions: [1] } },
    });
    expect(stored.history).toEqual([expect.objectContaining({ action: 'promote', version: 1, from: null, actor: 'newcomer' })]);
    expect(parseModelConfig((await object('prod/ident/config.pbtxt')).toString('utf8')).version_policy).toEqual({
      specific: { versions: [1] },
    });

    const infer = () =>
      postJson(`${server!.url}/v2/models/ident/infer`, {
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
      });
    await waitFor(async () => (await infer()).json?.model_version === '1', 20_000, 'the server serving the new model');

    // Promoting it again is no creation: --config on a model that has one replaces it, as before.
    const again = await runCli(
      [
        'models',
        'promote',
        '--model-repository',
        location,
        '--model',
        'ident',
        '--file',
        files['v1.onnx']!,
        '--config',
        files['config.pbtxt']!,
      ],
      S3RVER_KEYS,
    );
    expect(again.stdout).toBe("promoted 'ident': now serving version 2 (was 1)\n");
  });

  it('models promote --wait says each answer that reports the new version, --wait-interval-secs apart, and never "does not report" it', async () => {
    const run = await runCli(
      [
        'models',
        'promote',
        '--model-repository',
        location,
        '--model',
        'ident',
        '--file',
        files['v2.onnx']!,
        '--wait',
        '--server-url',
        server!.url,
        '--wait-interval-secs',
        '1',
      ],
      S3RVER_KEYS,
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe("promoted 'ident': now serving version 3 (was 2)\n");
    const lines = stderrLines(run);
    expect(lines.filter((l) => l.msg === 'server does not report the new version yet' && l.seen === 'versions [3]')).toEqual([]);
    const answers = lines.filter((l) => /^server (reports|serves) version 3 of 'ident'/.test(l.msg ?? ''));
    expect(answers.map((l) => l.msg)).toEqual([
      "server reports version 3 of 'ident' (1 of 3 answers in a row)",
      "server reports version 3 of 'ident' (2 of 3 answers in a row)",
      "server serves version 3 of 'ident'",
    ]);
    // Every answer is said, each after a wait of --wait-interval-secs (no upper bound: a loaded machine answers late).
    for (let i = 1; i < answers.length; i++) expect(answers[i]!.time! - answers[i - 1]!.time!).toBeGreaterThanOrEqual(950);
  });
});
