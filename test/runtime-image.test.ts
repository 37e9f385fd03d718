/**
 * What ships is what is tested: the image's runtime tree, built as the Dockerfile builds it (a
 * clean install of the staged context, the build, `pnpm deploy --prod`) in a folder outside the
 * workspace, and started as the image starts it (ENTRYPOINT and CMD, the image's working
 * directory and environment) on the example repository mounted where CMD names it. No Docker
 * engine runs on these machines, so test/support/image-tree.ts replays the Dockerfile's steps and
 * fails on any it does not know.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient, type InferResult } from '@batchwise/client';
import { EPHEMERAL_PORT_FLAGS, spawnServer, type ServerProcess } from '../packages/server/src/cli/server-process.ts';
import { BLUE, RED, png } from '../examples/test-support/images.ts';
import { SENTENCES } from '../examples/test-support/sentences.ts';
import { mlp } from '@batchwise/modelgen';
import { DockerfileParser } from 'dockerfile-ast';
import { buildImageTree, globalArgs, planImage, REPOSITORY_ROOT, type ImagePlan, type ImageTree } from './support/image-tree.ts';
import { makeRepository } from './support/repository.ts';
import { probeExecutionProvider } from '../packages/server/src/backends/onnxruntime/provider-probe.ts';
import { EXAMPLES } from './support/repository.ts';
import { startTestS3, type TestS3 } from './support/s3.ts';
import { IMAGE_URI, REQUIRED, only, synth } from '../infra/test/synth.ts';

const DOCKERFILE = readFileSync(join(REPOSITORY_ROOT, 'Dockerfile'), 'utf8');
/** Where the Dockerfile's CMD expects the model repository (`docker run -v <repo>:/models`). */
const MODELS_MOUNT = '/models';

describe('the Dockerfile replay', () => {
  it('knows every instruction of the Dockerfile, and says why it skips the ones it cannot run here', () => {
    const plan = planImage(DOCKERFILE);
    expect(plan.runtime.entrypoint[0]).toBe('node');
    expect(plan.runtime.cmd[0]).toBe('serve');
    for (const step of plan.steps.filter((s) => s.kind === 'skip')) expect(step.reason).not.toBe('');
  });

  it.each([
    ['HEALTHCHECK CMD curl -f http://localhost:8000/v2/health/live', 'HEALTHCHECK'],
    ['ADD https://example.com/x.tgz /app/', 'ADD'],
    ['RUN --network=none pnpm test', 'the flag --network=none'],
    ['RUN cp /app/x /opt/x', "names /opt/x, outside the image's folders"],
    ['COPY --from=tools /bin/x /bin/x', "copies from 'tools'"],
    ['ENTRYPOINT node packages/server/dist/cli/main.js', 'exec (JSON array) form'],
    ['FROM ${BASE_IMAGE} AS other', 'names $BASE_IMAGE, which no ARG before the first FROM declares'],
    ['FROM ${SERVER_IMAGE:-cuda} AS other', 'only $NAME and ${NAME}'],
    ['ARG --help', 'only ARG NAME and ARG NAME=default'],
  ])('fails naming a step it would not replay: %s', (line, named) => {
    const changed = DOCKERFILE.replace(/^ENTRYPOINT /m, `${line}\nENTRYPOINT `);
    const lineNumber = changed.split('\n').indexOf(line) + 1;
    expect(() => planImage(changed)).toThrow(`Dockerfile:${lineNumber} `);
    expect(() => planImage(changed)).toThrow(named);
  });
});

/** What a plan does to the tree, without where in the file: two images that do the same build the same tree. */
const treeSteps = (plan: ImagePlan): Record<string, string>[] =>
  plan.steps.flatMap((step): Record<string, string>[] => {
    if (step.kind === 'run') return [{ run: step.command, in: step.workdir }];
    if (step.kind === 'copy-context') return [{ context: step.destination }];
    if (step.kind === 'copy-stage') return [{ copy: step.source, to: step.destination }];
    return [];
  });

describe('the server images, chosen by the SERVER_IMAGE build argument', () => {
  const cuda = planImage(DOCKERFILE);
  const webgpu = planImage(DOCKERFILE, { SERVER_IMAGE: 'webgpu' });

  it('has one EXPOSE, ENTRYPOINT and CMD, in the last stage, which starts from the stage SERVER_IMAGE names', () => {
    const instructions = DockerfileParser.parse(DOCKERFILE).getInstructions();
    const lines = (keyword: string) => instructions.filter((i) => i.getKeyword() === keyword).map((i) => i.getRange().start.line);
    for (const keyword of ['EXPOSE', 'ENTRYPOINT', 'CMD']) expect(lines(keyword), keyword).toHaveLength(1);
    const lastFrom = lines('FROM').at(-1)!;
    expect(lines('ENTRYPOINT')[0]).toBeGreaterThan(lastFrom);
    expect(instructions.find((i) => i.getRange().start.line === lastFrom)!.getArgumentsContent()).toBe('${SERVER_IMAGE} AS server');
    expect(cuda.stages.at(-1)).toEqual({ name: 'server', from: 'cuda' });
    expect(webgpu.stages.at(-1)).toEqual({ name: 'server', from: 'webgpu' });
  });

  it('builds the CUDA image by default, and the webgpu image with SERVER_IMAGE=webgpu', () => {
    expect(globalArgs(DOCKERFILE)).toEqual({ SERVER_IMAGE: 'cuda' });
    expect(planImage(DOCKERFILE, { SERVER_IMAGE: 'cuda' })).toEqual(cuda);
    // `node` gives the CUDA image its Node binary, which the replay does not copy (the tree runs on this machine's).
    expect(cuda.stages.map((s) => s.name)).toEqual(['build', 'build-cuda', 'cuda', 'server']);
    expect(cuda.stages.find((s) => s.name === 'cuda')!.from).toMatch(/^nvidia\/cuda:/);
    expect(webgpu.stages).toEqual([
      { name: 'build', from: 'node:22-bookworm' },
      { name: 'webgpu', from: 'node:22-bookworm-slim' },
      { name: 'server', from: 'webgpu' },
    ]);
  });

  it('refuses a SERVER_IMAGE that is no stage, naming the stages, and a build argument no ARG declares', () => {
    const serverFrom = DOCKERFILE.split('\n').findIndex((line) => line.startsWith('FROM ${SERVER_IMAGE}')) + 1;
    expect(() => planImage(DOCKERFILE, { SERVER_IMAGE: 'rocm' })).toThrow(`Dockerfile:${serverFrom} `);
    expect(() => planImage(DOCKERFILE, { SERVER_IMAGE: 'rocm' })).toThrow(
      "${SERVER_IMAGE} is 'rocm', which is no stage of this Dockerfile (stages: build, build-cuda, node, webgpu, cuda)",
    );
    expect(() => planImage(DOCKERFILE, { SERVER_IMAGES: 'webgpu' })).toThrow(
      'no ARG of the Dockerfile declares the build argument SERVER_IMAGES',
    );
  });

  it("stops an image built on another stage of the file at the server stage's check", () => {
    // SERVER_IMAGE=node plans (node is a stage), as Docker would build it: the server stage's RUN refuses it.
    for (const [value, status] of [
      ['node', 1],
      ['build', 1],
      ['cuda', 0],
      ['webgpu', 0],
    ] as const) {
      const checks = planImage(DOCKERFILE, { SERVER_IMAGE: value }).steps.filter((s) => s.kind === 'run' && s.stage === 'server');
      expect(checks).toHaveLength(1);
      const check = checks[0]! as Extract<ImagePlan['steps'][number], { kind: 'run' }>;
      // As Docker runs a RUN: /bin/sh -c, with the stage's ARGs in its environment.
      const result = spawnSync('/bin/sh', ['-c', check.command], {
        env: { PATH: process.env['PATH'], ...check.env },
        stdio: ['ignore', 'pipe', 'pipe'],
        encoding: 'utf8',
      });
      expect(result.status, value).toBe(status);
      expect(result.stderr).toBe(status === 0 ? '' : `SERVER_IMAGE must be cuda or webgpu, got '${value}'\n`);
    }
  });

  it('makes the webgpu image of the same tree as the CUDA image, without the CUDA provider libraries', () => {
    expect(treeSteps(webgpu)).toEqual(treeSteps(cuda));
    const skipped = (plan: ImagePlan) => plan.steps.flatMap((s) => (s.kind === 'skip' ? [s.text] : []));
    expect(skipped(cuda).some((text) => text.includes('ONNXRUNTIME_NODE_INSTALL=cuda12'))).toBe(true);
    expect(skipped(webgpu).some((text) => text.includes('ONNXRUNTIME_NODE_INSTALL=cuda12'))).toBe(false);
    expect(skipped(webgpu).some((text) => text.includes('libvulkan1'))).toBe(true);
    const { env: webgpuEnv, ...webgpuStart } = webgpu.runtime;
    const { env: cudaEnv, ...cudaStart } = cuda.runtime;
    expect(webgpuStart).toEqual(cudaStart);
    // The NVIDIA container runtime mounts the Vulkan driver only with the graphics capability.
    expect(webgpuEnv).toEqual({ ...cudaEnv, NVIDIA_DRIVER_CAPABILITIES: 'compute,utility,graphics' });
  });
});

let root: string;
let tree: ImageTree;
const buildLog: string[] = [];
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'batchwise-image-'));
  tree = buildImageTree(root, (line) => buildLog.push(line));
}, 600_000);
afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

describe("the image's runtime tree, started as the image starts it", () => {
  let server: ServerProcess;
  let http: HttpClient | undefined;
  let grpc: GrpcClient | undefined;

  /** The image's ENTRYPOINT with these arguments, run from the tree as a one-shot command. */
  const cli = (args: readonly string[]) => {
    const [, ...nodeArgs] = tree.plan.runtime.entrypoint;
    return spawnSync(process.execPath, [...nodeArgs, ...args], {
      cwd: tree.inImage(tree.plan.runtime.workdir),
      env: { ...process.env, ...tree.plan.runtime.env },
      encoding: 'utf8',
    });
  };

  beforeAll(async () => {
    cpSync(EXAMPLES, tree.inImage(MODELS_MOUNT), { recursive: true });
    const { entrypoint, cmd, workdir, env } = tree.plan.runtime;
    expect(entrypoint[0]).toBe('node');
    // docker run publishes the container's ports; on a shared machine the tree takes free ones.
    const argv = [
      ...entrypoint.slice(1),
      ...cmd.map((arg) => (arg === MODELS_MOUNT ? tree.inImage(MODELS_MOUNT) : arg)),
      ...EPHEMERAL_PORT_FLAGS,
    ];
    server = await spawnServer(argv, env, { cwd: tree.inImage(workdir) });
    http = new HttpClient({ url: server.httpUrl });
    grpc = new GrpcClient({ url: server.grpcAddress });
  }, 600_000);

  afterAll(async () => {
    await http?.close();
    grpc?.close();
    if (server && server.child.exitCode === null) await server.stop();
  });

  it('is built outside the workspace, from compiled JavaScript only', () => {
    const app = tree.inImage(tree.plan.runtime.workdir);
    expect(app.startsWith(REPOSITORY_ROOT)).toBe(false);
    expect(existsSync(join(app, tree.plan.runtime.entrypoint.at(-1)!))).toBe(true);
    // Every workspace package the server imports resolves to its dist under the image's condition.
    const resolved = cli(['--help']);
    expect(resolved.status, resolved.stderr).toBe(0);
    expect(buildLog.join('\n')).toContain('not replayed');
  });

  it('is ready, and answers `simple` over HTTP JSON, HTTP binary and gRPC', async () => {
    expect((await fetch(`${server.httpUrl}/v2/health/ready`)).status).toBe(200);
    const a = Array.from({ length: 16 }, (_, i) => i);
    const b = Array.from({ length: 16 }, () => 1);
    const request = {
      model: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32' as const, shape: [1, 16], data: a },
        { name: 'INPUT1', datatype: 'INT32' as const, shape: [1, 16], data: b },
      ],
    };
    const outputs = (result: InferResult) =>
      ['OUTPUT0', 'OUTPUT1'].map((n) => Array.from(result.outputs.find((o) => o.name === n)!.data as Int32Array));
    const expected = [a.map((x, i) => x + b[i]!), a.map((x, i) => x - b[i]!)];
    const json = (await (
      await fetch(`${server.httpUrl}/v2/models/simple/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: request.inputs }),
      })
    ).json()) as { outputs: { data: number[] }[] };
    expect(json.outputs.map((o) => o.data)).toEqual(expected);
    expect(outputs(await http!.infer({ ...request, binary: true }))).toEqual(expected);
    expect(outputs(await grpc!.infer(request))).toEqual(expected);
  });

  it('runs both example pipelines (JavaScript models importing @batchwise/backend, ensembles) and the BLS router', async () => {
    const texts = Object.keys(SENTENCES);
    const text = await http!.infer({
      model: 'text_classification',
      inputs: [{ name: 'text', datatype: 'BYTES', shape: [texts.length, 1], data: texts }],
    });
    const labels = text.outputs.find((o) => o.name === 'labels')!;
    const first = (labels.data as Uint8Array[]).filter((_, i) => i % labels.shape[1]! === 0).map((b) => Buffer.from(b).toString());
    expect(first).toEqual(Object.values(SENTENCES));

    const image = await grpc!.infer({
      model: 'image_classification',
      inputs: [{ name: 'image', datatype: 'BYTES', shape: [1, 1], data: [png(48, 40, (x) => (x < 36 ? RED : BLUE))] }],
    });
    const imageLabels = (image.outputs.find((o) => o.name === 'labels')!.data as Uint8Array[]).map((b) => Buffer.from(b).toString());
    expect(imageLabels.slice(0, 2)).toEqual(['red', 'blue']);

    const routed = await http!.infer({
      model: 'bls_router',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], data: [500, 1, 2] }],
    });
    expect(Array.from(routed.outputs.find((o) => o.name === 'OUTPUT0')!.data as Float32Array)).toEqual([250, 0.5, 1]);
  });

  it("runs `models list`, `models canary --help` and `tune --help` from the tree's CLI", () => {
    const list = cli(['models', 'list', '--model-repository', tree.inImage(MODELS_MOUNT)]);
    expect(list.status, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^simple\b/m);
    const canary = cli(['models', 'canary', '--help']);
    expect(canary.status, canary.stderr).toBe(0);
    expect(canary.stdout).toContain('--version <n>');
    const tune = cli(['tune', '--help']);
    expect(tune.status, tune.stderr).toBe(0);
    expect(tune.stdout).toContain('--latency-objective <duration>');
  });

  it('started without the condition, says in one line how to start it', () => {
    const script = tree.plan.runtime.entrypoint.at(-1)!;
    const plain = spawnSync(process.execPath, [script, 'serve'], { cwd: tree.inImage(tree.plan.runtime.workdir), encoding: 'utf8' });
    expect(plain.status).toBe(1);
    expect(plain.stderr.trim().split('\n')).toEqual([
      `the compiled batchwise CLI needs Node's batchwise-dist condition: node --conditions=batchwise-dist ${script} serve`,
    ]);
  });

  it('exits 0 on SIGTERM', async () => {
    await http?.close();
    grpc?.close();
    [http, grpc] = [undefined, undefined];
    expect(await server.stop()).toBe(0);
  });
});

describe("the webgpu image's runtime tree, started as that image starts with its ECS task's environment", () => {
  // Both images are one tree (the server images, above): here it starts as the webgpu image does.
  const plan = planImage(DOCKERFILE, { SERVER_IMAGE: 'webgpu' });
  let webgpuUsable = false;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: ServerProcess | undefined;

  beforeAll(async () => {
    webgpuUsable = (await probeExecutionProvider('webgpu')).usable;
    repo = await makeRepository([
      {
        name: 'on_webgpu',
        model: mlp({ layers: 2, width: 32, inputSize: 8 }),
        config: `name: "on_webgpu"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 32 ] } ]
instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]
optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "webgpu" } ] } }`,
      },
    ]);
    cpSync(join(EXAMPLES, 'simple'), join(repo.dir, 'simple'), { recursive: true });
    const container = only(synth({ ...REQUIRED, imageUri: IMAGE_URI, serverImage: 'webgpu' }).template, 'AWS::ECS::TaskDefinition').props
      .ContainerDefinitions[0];
    const taskEnv = Object.fromEntries(
      (container.Environment as { Name: string; Value: unknown }[])
        .filter((e) => typeof e.Value === 'string')
        .map((e) => [e.Name, e.Value as string]),
    );
    expect(taskEnv['NVIDIA_DRIVER_CAPABILITIES']).toBe('compute,utility,graphics');
    const { entrypoint, cmd, workdir, env } = plan.runtime;
    const argv = [...entrypoint.slice(1), ...cmd.map((arg) => (arg === MODELS_MOUNT ? repo.dir : arg)), ...EPHEMERAL_PORT_FLAGS];
    server = await spawnServer(argv, { ...env, ...taskEnv }, { cwd: tree.inImage(workdir) });
  }, 600_000);

  afterAll(async () => {
    if (server && server.child.exitCode === null) await server.stop();
    await repo?.remove();
  });

  it('serves, and runs the webgpu model on a Vulkan GPU or refuses it, naming what the host lacks', async () => {
    expect((await fetch(`${server!.httpUrl}/v2/models/simple/ready`)).status).toBe(200);
    if (webgpuUsable) {
      const meta = (await (await fetch(`${server!.httpUrl}/v2/models/on_webgpu`)).json()) as { parameters: Record<string, unknown> };
      expect(meta.parameters['execution_provider']).toBe('WebGpuExecutionProvider');
      return;
    }
    const index = (await (await fetch(`${server!.httpUrl}/v2/repository/index`, { method: 'POST', body: '{}' })).json()) as {
      name: string;
      reason?: string;
    }[];
    expect(index.find((row) => row.name === 'on_webgpu')?.reason).toMatch(/webgpu accelerator requires a Vulkan GPU adapter/);
  });

  it("says what the host lacks for WebGPU through the tree's `doctor --expect-webgpu`", () => {
    const [, ...nodeArgs] = plan.runtime.entrypoint;
    const doctor = spawnSync(
      process.execPath,
      [...nodeArgs, 'doctor', '--expect-webgpu', '--server-metrics', 'http://127.0.0.1:1/metrics'],
      {
        cwd: tree.inImage(plan.runtime.workdir),
        env: { ...process.env, ...plan.runtime.env },
        encoding: 'utf8',
      },
    );
    expect(doctor.stdout).toMatch(new RegExp(`^${webgpuUsable ? 'ok  ' : 'FAIL'} +webgpu-vulkan-adapter `, 'm'));
  });
});

describe("the image's runtime tree, started with the ECS task definition's command", () => {
  let s3: TestS3;
  let server: ServerProcess | undefined;

  beforeAll(async () => {
    s3 = await startTestS3(join(root, 's3'));
  });

  afterAll(async () => {
    if (server && server.child.exitCode === null) await server.stop();
    await s3?.close();
  });

  it('serves the example repository from S3 (JavaScript models find @batchwise/backend, Python models their stub), and passes its health check', async () => {
    const container = only(synth({ ...REQUIRED, imageUri: IMAGE_URI }).template, 'AWS::ECS::TaskDefinition').props.ContainerDefinitions[0];
    // The one part CloudFormation fills in at deploy time is the repository (s3://<bucket>/<prefix>): here, s3rver's.
    const command = (container.Command as unknown[]).map((part, i, all) => {
      if (typeof part === 'string') return part;
      expect(all[i - 1], 'the only deploy-time value is the repository').toBe('--model-repository');
      return s3.location('models');
    });
    for (const file of filesUnder(EXAMPLES)) await s3.put(`models/${relative(EXAMPLES, file)}`, readFileSync(file));

    const { entrypoint, workdir, env } = tree.plan.runtime;
    const taskEnv = {
      ...env,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      ...Object.fromEntries((container.Secrets as { Name: string }[]).map((secret) => [secret.Name, 'a-key-from-secrets-manager'])),
    };
    server = await spawnServer([...entrypoint.slice(1), ...command, ...EPHEMERAL_PORT_FLAGS], taskEnv, { cwd: tree.inImage(workdir) });
    const http = new HttpClient({ url: server.httpUrl });
    try {
      const routed = await http.infer({ model: 'bls_router', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: [1, 2] }] });
      expect(Array.from(routed.outputs.find((o) => o.name === 'OUTPUT0')!.data as Float32Array)).toEqual([2, 4]);
      // Python models from S3, on the tree's stub (its src ships beside dist): the text pipeline in both forms agrees.
      const sentence = { name: 'text', datatype: 'BYTES' as const, shape: [1, 1], data: ['I love this wonderful movie'] };
      const [js, py] = await Promise.all(
        ['text_classification', 'text_classification_py'].map((model) => http.infer({ model, inputs: [sentence] })),
      );
      expect(py!.outputs).toEqual(js!.outputs);
    } finally {
      await http.close();
    }

    // The container's health check, as ECS runs it inside the task (its port is the container's 8000).
    const [kind, node, ...healthArgs] = container.HealthCheck.Command as string[];
    expect([kind, node]).toEqual(['CMD', 'node']);
    const port = new URL(server.httpUrl).port;
    const health = spawnSync(
      process.execPath,
      healthArgs.map((a) => a.replace('127.0.0.1:8000/', `127.0.0.1:${port}/`)),
      { encoding: 'utf8' },
    );
    expect(health.status, health.stderr).toBe(0);
    // Its SIGTERM takes the default 5 s shutdown grace; the image's exit status on SIGTERM is the test above's.
    server.child.kill('SIGKILL');
    await server.exited;
  });
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}
