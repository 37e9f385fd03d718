/**
 * Triton's own qa tests of the Python backend (test/fixtures/triton-qa-python, see its README): the
 * numpy-only models of qa/python_models, loaded unchanged, driven by the unchanged qa scripts that
 * Triton's CI runs against them (python unittest suites using tritonclient over HTTP and gRPC).
 *
 * Each suite replays, in TypeScript, the part of its qa test.sh that builds the model repository (the
 * same `mkdir -p`, `cp`, `sed -i` and `echo >>` steps, in the same order, into a `models/` folder
 * beside the qa script in a temporary copy of the qa tree, as test.sh does in its own folder), starts a
 * real Batchwise server on that repository, and runs the qa script's test methods in one process, as
 * `python3 -m unittest -v <module>.<Class>.<test> ...` in the script's folder (test.sh runs them with
 * pytest, one process a script; unittest runs the same TestCase methods, and pytest is not installed here). The scripts
 * hardcode Triton's default ports (8000 HTTP, 8001 gRPC, 8002 metrics); the test server listens on
 * ephemeral ones, so they run under test/support/triton/run_qa.py, which rewrites exactly those
 * addresses (tritonclient's constructors, and raw `requests` URLs) and nothing else. TEST_WINDOWS=1 is
 * set for qa/common/shm_util.py: its leak probe needs `triton_shm_monitor`, a C extension of Triton's CI
 * that watches Triton's own /dev/shm regions (the probe is skipped with it, as on Triton's Windows CI).
 * Where a test reads the server log (SERVER_LOG or the file name test.sh gives it), the server's log is
 * written to that file (pino JSON lines; the tests look for substrings of the model's log messages).
 *
 * Every qa test method is listed below with its fate: run (and must pass), or left out with the reason.
 * Skipped as a whole, with a warning, where tritonclient is not built (../shared/tools/setup-triton-client.sh;
 * TRITON_CLIENT_DIR, default ~/.cache/tritonclient).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { appendFile, copyFile, cp, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer } from './support/server.ts';

const CLIENT_DIR = process.env['TRITON_CLIENT_DIR'] ?? join(homedir(), '.cache', 'tritonclient');
const PYTHON_PATH = join(CLIENT_DIR, 'py');
const tritonclient = existsSync(join(PYTHON_PATH, 'tritonclient', 'http')) && existsSync(join(PYTHON_PATH, 'tritonclient', 'grpc'));
if (!tritonclient)
  console.warn(
    `SKIPPED (Triton's Python client missing at ${PYTHON_PATH}): Triton's qa tests of the Python backend; ` +
      'build it with ../shared/tools/setup-triton-client.sh',
  );

/** The vendored upstream tree (paths as in triton-inference-server/server: qa/...). */
const UPSTREAM = new URL('./fixtures/triton-qa-python/', import.meta.url).pathname;
const RUN_QA = new URL('./support/triton/run_qa.py', import.meta.url).pathname;
const PYTHON = '/usr/bin/python3';

/**
 * A qa folder's working copy: `<tmp>/qa/<dir>` holding the qa script(s), with `<tmp>/qa/common` and
 * `<tmp>/qa/python_models` beside it as in the server repository, so that the script's
 * `sys.path.append("../common")` and test.sh's `cp ../../python_models/...` mean what they mean there.
 */
interface QaFolder {
  readonly root: string;
  /** `<root>/qa/<dir>`: test.sh's working directory. */
  readonly cwd: string;
}

async function qaFolder(dir: string, scripts: readonly string[]): Promise<QaFolder> {
  const root = await mkdtemp(join(tmpdir(), 'batchwise-triton-qa-'));
  await cp(join(UPSTREAM, 'qa', 'common'), join(root, 'qa', 'common'), { recursive: true });
  await cp(join(UPSTREAM, 'qa', 'python_models'), join(root, 'qa', 'python_models'), { recursive: true });
  const cwd = join(root, 'qa', dir);
  await mkdir(cwd, { recursive: true });
  for (const script of scripts) await copyFile(join(UPSTREAM, 'qa', dir, script), join(cwd, script));
  return { root, cwd };
}

/** The shell steps of a test.sh, relative to its folder (`cwd`). */
function shell(cwd: string) {
  const at = (path: string) => join(cwd, path);
  return {
    /** `mkdir -p PATH` */
    mkdir: (path: string) => mkdir(at(path), { recursive: true }),
    /** `cp SRC DST` (DST a folder, ending in '/' or existing, or a file name) */
    cp: async (src: string, dst: string) => {
      const target = dst.endsWith('/') || existsSync(at(dst)) ? join(at(dst), basename(src)) : at(dst);
      await copyFile(at(src), target);
    },
    /** `cp -r SRC DST` where DST does not exist */
    cpR: (src: string, dst: string) => cp(at(src), at(dst), { recursive: true }),
    /** `mv SRC DST` */
    mv: (src: string, dst: string) => rename(at(src), at(dst)),
    /** `sed -i "s/PATTERN/REPLACEMENT/[g]" FILE`, line by line (`^`, `.*` as sed's basic regular expressions here) */
    sed: async (file: string, pattern: RegExp, replacement: string) => {
      const text = await readFile(at(file), 'utf8');
      const lines = text.split('\n');
      await writeFile(at(file), lines.map((line) => line.replace(pattern, replacement)).join('\n'));
    },
    /** `echo "LINE" >> FILE` */
    echo: (line: string, file: string) => appendFile(at(file), `${line}\n`),
  };
}

/** One run of a qa script's test method (or of the script itself). */
interface QaRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface QaServer {
  readonly folder: QaFolder;
  readonly http: string;
  readonly grpc: string;
  readonly metrics: string;
  run(args: readonly string[], env?: Record<string, string>, timeoutMs?: number): Promise<QaRun>;
  close(): Promise<void>;
}

/**
 * Serves `<cwd>/<models>` with a test server (its log in `<cwd>/<serverLog>` when given, at info
 * level as --log-verbose=1 has Triton log the model's pb_utils.Logger lines) and runs qa scripts
 * against it in `<cwd>`.
 */
async function serveQa(folder: QaFolder, models: string, serverLog?: string): Promise<QaServer> {
  const logFile = serverLog === undefined ? undefined : join(folder.cwd, serverLog);
  const logger = logFile === undefined ? undefined : pino({ level: 'debug' }, pino.destination({ dest: logFile, sync: true, mkdir: true }));
  let server: Awaited<ReturnType<typeof startTestServer>>;
  try {
    server = await startTestServer([join(folder.cwd, models)], logger ? { logger } : {});
  } catch (error) {
    await rm(folder.root, { recursive: true, force: true });
    throw error;
  }
  const http = `127.0.0.1:${server.httpPort}`;
  const grpc = `127.0.0.1:${server.grpcPort}`;
  const metrics = `127.0.0.1:${server.metricsPort}`;
  return {
    folder,
    http,
    grpc,
    metrics,
    run: (args, env = {}, timeoutMs = 60_000) =>
      new Promise((resolve) => {
        execFile(
          PYTHON,
          [RUN_QA, http, grpc, metrics, ...args],
          {
            cwd: folder.cwd,
            env: {
              ...process.env,
              PYTHONPATH: PYTHON_PATH,
              TEST_WINDOWS: '1',
              ...(logFile === undefined ? {} : { SERVER_LOG: logFile }),
              ...env,
            },
            timeout: timeoutMs,
            maxBuffer: 16 * 1024 * 1024,
          },
          (error, stdout, stderr) => {
            const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
            resolve({ code, stdout, stderr });
          },
        );
      }),
    close: async () => {
      await server.close();
      logger?.flush();
      await rm(folder.root, { recursive: true, force: true });
    },
  };
}

const transcript = (run: QaRun) => `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;

/** `python3 -m unittest -v module.Class.test` passed: exit 0, one test ran, OK (not skipped). */
function expectPassed(run: QaRun, test: string): void {
  expect(run.code, transcript(run)).toBe(0);
  expect(run.stderr, transcript(run)).toMatch(/^Ran 1 test in /m);
  expect(run.stderr, transcript(run)).toMatch(/^OK$/m);
  expect(run.stderr, transcript(run)).toContain(`${test.split('.').at(-1)} (`);
}

/** One test method of a `python3 -m unittest -v` run of several: it ran, and neither failed, errored nor was skipped. */
function expectPassedAmong(run: QaRun, test: string): void {
  const method = test.split('.').at(-1)!;
  const id = `${method} (${test})`;
  expect(run.stderr, transcript(run)).toContain(`${id} ...`);
  expect(run.stderr, transcript(run)).not.toMatch(new RegExp(`^(FAIL|ERROR): ${method} \\(`, 'm'));
  expect(run.stderr, transcript(run)).not.toMatch(new RegExp(`^${method} \\([^)]*\\) \\.\\.\\. skipped`, 'm'));
}

/**
 * Runs the listed test methods of a qa script, unchanged: one `python3 -m unittest -v` process for them
 * all, in order, as Triton's test.sh runs a script's tests in one pytest process (each listed method
 * is then its own test here, passing when it ran and did not fail); `concurrent`: each method in its own
 * process, side by side (only where each uses its own client and its own models' state, to bound the
 * time of tests that mostly sleep). `skipped` names those left out, with the reason.
 */
function unittests(
  served: () => QaServer,
  module: string,
  testClass: string,
  tests: readonly string[],
  options: { env?: Record<string, string>; skipped?: Record<string, string>; concurrent?: boolean; timeoutMs?: number } = {},
) {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const names = tests.map((test) => `${module}.${testClass}.${test}`);
  if (options.concurrent) {
    for (const name of names) {
      it.concurrent(`${name} passes`, { timeout: timeoutMs }, async () => {
        expectPassed(await served().run(['-m', 'unittest', '-v', name], options.env, timeoutMs), name);
      });
    }
  } else {
    let batch: QaRun;
    const batchTimeoutMs = timeoutMs * names.length;
    beforeAll(async () => {
      batch = await served().run(['-m', 'unittest', '-v', ...names], options.env, batchTimeoutMs);
    }, batchTimeoutMs);
    for (const name of names) it(`${name} passes`, () => expectPassedAmong(batch, name));
  }
  for (const [test, reason] of Object.entries(options.skipped ?? {}))
    it.skip(`${module}.${testClass}.${test}: left out, ${reason}`, () => {});
}

// ---------------------------------------------------------------------------------------------------
// qa/L0_backend_python/lifecycle (test.sh lines "mkdir -p models/error_code/1/" .. the wrong_model sed)
// ---------------------------------------------------------------------------------------------------
describe.skipIf(!tritonclient)('qa/L0_backend_python/lifecycle: lifecycle_test.py', () => {
  let served: QaServer;
  beforeAll(async () => {
    const folder = await qaFolder('L0_backend_python/lifecycle', ['lifecycle_test.py']);
    const sh = shell(folder.cwd);
    await sh.mkdir('models/error_code/1/');
    await sh.cp('../../python_models/error_code/model.py', './models/error_code/1/');
    await sh.cp('../../python_models/error_code/config.pbtxt', './models/error_code/');

    await sh.mkdir('models/execute_cancel/1/');
    await sh.cp('../../python_models/execute_cancel/model.py', './models/execute_cancel/1/');
    await sh.cp('../../python_models/execute_cancel/config.pbtxt', './models/execute_cancel/');

    await sh.mkdir('models/execute_error/1/');
    await sh.cp('../../python_models/execute_error/model.py', './models/execute_error/1/');
    await sh.cp('../../python_models/execute_error/config.pbtxt', './models/execute_error/');
    await sh.sed('models/execute_error/config.pbtxt', /^name:.*/, 'name: "execute_error"');
    await sh.sed('models/execute_error/config.pbtxt', /^max_batch_size:.*/, 'max_batch_size: 8');
    await sh.echo(
      'dynamic_batching { preferred_batch_size: [8], max_queue_delay_microseconds: 12000000 }',
      'models/execute_error/config.pbtxt',
    );

    await sh.mkdir('models/execute_grpc_error/1/');
    await sh.cp('../../python_models/execute_grpc_error/model.py', './models/execute_grpc_error/1/');
    await sh.cp('../../python_models/execute_grpc_error/config.pbtxt', './models/execute_grpc_error/');
    await sh.sed('models/execute_grpc_error/config.pbtxt', /^name:.*/, 'name: "execute_grpc_error"');
    await sh.sed('models/execute_grpc_error/config.pbtxt', /^max_batch_size:.*/, 'max_batch_size: 8');
    await sh.echo(
      'dynamic_batching { preferred_batch_size: [8], max_queue_delay_microseconds: 1200000 }',
      'models/execute_grpc_error/config.pbtxt',
    );

    await sh.mkdir('models/decoupled_grpc_error/1/');
    await sh.cp('../../python_models/decoupled_grpc_error/model.py', './models/decoupled_grpc_error/1/');
    await sh.cp('../../python_models/decoupled_grpc_error/config.pbtxt', './models/decoupled_grpc_error/');

    await sh.mkdir('models/execute_return_error/1/');
    await sh.cp('../../python_models/execute_return_error/model.py', './models/execute_return_error/1/');
    await sh.cp('../../python_models/execute_return_error/config.pbtxt', './models/execute_return_error/');

    await sh.mkdir('models/wrong_model/1/');
    await sh.cp('../../python_models/wrong_model/model.py', './models/wrong_model/1/');
    await sh.cp('../../python_models/wrong_model/config.pbtxt', './models/wrong_model/');
    await sh.sed('models/wrong_model/config.pbtxt', /^name:.*/, 'name: "wrong_model"');
    await sh.sed('models/wrong_model/config.pbtxt', /TYPE_FP32/g, 'TYPE_UINT32');

    // test.sh's SERVER_LOG: test_execute_cancel reads it by this name, in its working directory.
    served = await serveQa(folder, 'models', 'lifecycle_server.log');
  });
  afterAll(async () => {
    await served?.close();
  });

  unittests(
    () => served,
    'lifecycle_test',
    'LifecycleTest',
    ['test_error_code', 'test_execute_cancel', 'test_batch_error', 'test_triton_grpc_error_error_off', 'test_infer_pymodel_error'],
    {
      // Each uses its own model (the error_off test alone uses execute_grpc_error); test_batch_error waits out execute_error's 12 s max_queue_delay (3 requests, preferred batch 8).
      concurrent: true,
      skipped: {
        test_triton_grpc_error_error_on: 'needs the triton_grpc_error gRPC header semantics (stream closed with a gRPC status on an error)',
        test_triton_grpc_error_multithreaded: 'needs the triton_grpc_error gRPC header semantics',
        test_triton_grpc_error_cancel: 'needs the triton_grpc_error gRPC header semantics',
        test_triton_grpc_error_decoupled_delayed_final: 'needs the triton_grpc_error gRPC header semantics',
      },
    },
  );
});

// ---------------------------------------------------------------------------------------------------
// qa/L0_backend_python/test.sh: the repository of its first server (python_test.py)
// ---------------------------------------------------------------------------------------------------
describe.skipIf(!tritonclient)('qa/L0_backend_python: python_test.py (the CPU tests)', () => {
  let served: QaServer;
  const savedTritonDir = process.env['TRITON_DIR'];
  beforeAll(async () => {
    const folder = await qaFolder('L0_backend_python', ['python_test.py']);
    const sh = shell(folder.cwd);
    await sh.mkdir('models/identity_fp32/1/');
    await sh.cp('../python_models/identity_fp32/model.py', './models/identity_fp32/1/model.py');
    await sh.cp('../python_models/identity_fp32/config.pbtxt', './models/identity_fp32/config.pbtxt');
    // Left out: models/identity_bf16 (its model.py imports torch; its test, test_bf16, is not run).

    await sh.cpR('./models/identity_fp32', './models/identity_uint8');
    await sh.sed('models/identity_uint8/config.pbtxt', /^name:.*/, 'name: "identity_uint8"');
    await sh.sed('models/identity_uint8/config.pbtxt', /TYPE_FP32/g, 'TYPE_UINT8');
    await sh.sed('models/identity_uint8/config.pbtxt', /^max_batch_size:.*/, 'max_batch_size: 8');
    await sh.echo(
      'dynamic_batching { preferred_batch_size: [8], max_queue_delay_microseconds: 12000000 }',
      'models/identity_uint8/config.pbtxt',
    );

    await sh.cpR('./models/identity_fp32', './models/identity_uint8_nobatch');
    await sh.sed('models/identity_uint8_nobatch/config.pbtxt', /^name:.*/, 'name: "identity_uint8_nobatch"');
    await sh.sed('models/identity_uint8_nobatch/config.pbtxt', /TYPE_FP32/g, 'TYPE_UINT8');
    // `sed -i "s/^max_batch_size:.*//" config.pbtxt >> config.pbtxt`: sed -i prints nothing, so the append adds nothing.
    await sh.sed('models/identity_uint8_nobatch/config.pbtxt', /^max_batch_size:.*/, '');

    await sh.cpR('./models/identity_fp32', './models/identity_uint32');
    await sh.sed('models/identity_uint32/config.pbtxt', /^name:.*/, 'name: "identity_uint32"');
    await sh.sed('models/identity_uint32/config.pbtxt', /TYPE_FP32/g, 'TYPE_UINT32');

    await sh.cpR('./models/identity_fp32', './models/identity_bool');
    await sh.sed('models/identity_bool/config.pbtxt', /^name:.*/, 'name: "identity_bool"');
    await sh.sed('models/identity_bool/config.pbtxt', /TYPE_FP32/g, 'TYPE_BOOL');

    await sh.cpR('./models/identity_fp32', './models/default_model_name');
    await sh.mv('./models/default_model_name/1/model.py', './models/default_model_name/1/mymodel.py');
    await sh.sed('models/default_model_name/config.pbtxt', /^name:.*/, 'name: "default_model_name"');
    await sh.echo('default_model_filename: "mymodel.py"', 'models/default_model_name/config.pbtxt');

    // Left out: models/pytorch_fp32_fp32 (torch; test_infer_pytorch is not run).

    await sh.mkdir('models/delayed_model/1/');
    await sh.cp('../python_models/delayed_model/model.py', './models/delayed_model/1/');
    await sh.cp('../python_models/delayed_model/config.pbtxt', './models/delayed_model/');
    await sh.mkdir('models/init_args/1/');
    await sh.cp('../python_models/init_args/model.py', './models/init_args/1/');
    await sh.cp('../python_models/init_args/config.pbtxt', './models/init_args/');
    // `sed -i "s|TRITON_DIR_PATH|${TRITON_DIR}|"`: the config has no TRITON_DIR_PATH (a no-op, replayed as one).
    await sh.sed('models/init_args/config.pbtxt', /TRITON_DIR_PATH/, folder.root);

    await sh.mkdir('models/optional/1/');
    await sh.cp('../python_models/optional/model.py', './models/optional/1/');
    await sh.cp('../python_models/optional/config.pbtxt', './models/optional/');

    await sh.mkdir('models/non_contiguous/1/');
    await sh.cp('../python_models/non_contiguous/model.py', './models/non_contiguous/1/');
    await sh.cp('../python_models/non_contiguous/config.pbtxt', './models/non_contiguous/config.pbtxt');

    await sh.mkdir('models/string/1/');
    await sh.cp('../python_models/string/model.py', './models/string/1/');
    await sh.cp('../python_models/string/config.pbtxt', './models/string');

    await sh.mkdir('models/string_fixed/1/');
    await sh.cp('../python_models/string_fixed/model.py', './models/string_fixed/1/');
    await sh.cp('../python_models/string_fixed/config.pbtxt', './models/string_fixed');

    await sh.mkdir('models/dlpack_identity/1/');
    await sh.cp('../python_models/dlpack_identity/model.py', './models/dlpack_identity/1/');
    await sh.cp('../python_models/dlpack_identity/config.pbtxt', './models/dlpack_identity');

    // init_args expects model_repository == $TRITON_DIR/qa/L0_backend_python/models/init_args: Triton's CI
    // runs the qa tree under TRITON_DIR (/opt/tritonserver), and the server's environment reaches the stub.
    process.env['TRITON_DIR'] = folder.root;
    try {
      served = await serveQa(folder, 'models');
    } finally {
      if (savedTritonDir === undefined) delete process.env['TRITON_DIR'];
      else process.env['TRITON_DIR'] = savedTritonDir;
    }
  });
  afterAll(async () => {
    await served?.close();
  });

  // python_test.py imports ml_dtypes at its top for test_bf16 alone (see run_qa.py).
  unittests(
    () => served,
    'python_test',
    'PythonTest',
    [
      'test_growth_error',
      'test_async_infer',
      'test_bool',
      'test_unicode',
      'test_string',
      'test_non_contiguous',
      'test_init_args',
      'test_optional_input',
    ],
    {
      env: { QA_PLACEHOLDER_MODULES: 'ml_dtypes' },
      skipped: {
        test_gpu_tensor_error: 'needs CUDA shared memory (a GPU)',
        test_dlpack_tensor_error: 'needs CUDA shared memory (a GPU)',
        test_bf16: 'identity_bf16 imports torch (not installed; the model is not copied)',
        test_infer_pytorch: 'pytorch_fp32_fp32 imports torch (not installed; the model is not copied)',
      },
    },
  );
});

// ---------------------------------------------------------------------------------------------------
// qa/L0_backend_python/response_sender/test.sh: its first repository (response_sender x 8)
// ---------------------------------------------------------------------------------------------------
describe.skipIf(!tritonclient)('qa/L0_backend_python/response_sender: response_sender_test.py', () => {
  let served: QaServer;
  beforeAll(async () => {
    const folder = await qaFolder('L0_backend_python/response_sender', ['response_sender_test.py']);
    const sh = shell(folder.cwd);
    await sh.mkdir('models');
    const variant = async (name: string, modelFile: 'model.py' | 'model_async.py', lines: readonly string[]) => {
      await sh.mkdir(`models/${name}/1`);
      await sh.cp('../../python_models/response_sender/model_common.py', `models/${name}/1`);
      await sh.cp(
        `../../python_models/response_sender/${modelFile}`,
        modelFile === 'model.py' ? `models/${name}/1` : `models/${name}/1/model.py`,
      );
      await sh.cp('../../python_models/response_sender/config.pbtxt', `models/${name}`);
      for (const line of lines) await sh.echo(line, `models/${name}/config.pbtxt`);
    };
    const DECOUPLED = 'model_transaction_policy { decoupled: True }';
    const BATCHING = 'dynamic_batching { max_queue_delay_microseconds: 500000 }';
    await variant('response_sender', 'model.py', []);
    await variant('response_sender_decoupled', 'model.py', [DECOUPLED]);
    await variant('response_sender_async', 'model_async.py', []);
    await variant('response_sender_decoupled_async', 'model_async.py', [DECOUPLED]);
    await variant('response_sender_batching', 'model.py', [BATCHING]);
    await variant('response_sender_decoupled_batching', 'model.py', [DECOUPLED, BATCHING]);
    await variant('response_sender_async_batching', 'model_async.py', [BATCHING]);
    await variant('response_sender_decoupled_async_batching', 'model_async.py', [DECOUPLED, BATCHING]);
    served = await serveQa(folder, 'models', 'response_sender_test.server.log');
  });
  afterAll(async () => {
    await served?.close();
  });

  unittests(
    () => served,
    'response_sender_test',
    'ResponseSenderTest',
    [
      'test_decoupled_zero_response_pre_return',
      'test_decoupled_zero_response_post_return',
      'test_decoupled_one_response_pre_return',
      'test_decoupled_one_response_post_return',
      'test_decoupled_two_response_pre_return',
      'test_decoupled_two_response_post_return',
      'test_decoupled_response_pre_and_post_return',
      'test_non_decoupled_one_response_on_return',
      'test_non_decoupled_one_response_pre_return',
      'test_decoupled_multiple_requests',
      'test_decoupled_one_response_on_return',
      'test_decoupled_one_response_pre_and_on_return',
      'test_decoupled_one_response_on_and_post_return',
      'test_non_decoupled_zero_response_pre_return',
      'test_non_decoupled_two_response_pre_return',
      'test_non_decoupled_one_response_pre_and_on_return',
      'test_non_decoupled_one_response_on_and_post_return',
      'test_non_decoupled_one_response_post_return',
      'test_non_decoupled_multiple_requests',
    ],
    {
      skipped: {
        test_non_decoupled_zero_response_post_return: 'skipped by upstream itself (@unittest.skip: "Model unload will hang")',
        test_non_decoupled_two_response_post_return: 'skipped by upstream itself (@unittest.skip: "Model unload will hang")',
      },
    },
  );
});

// ---------------------------------------------------------------------------------------------------
// qa/L0_backend_python/async_execute/test.sh
// ---------------------------------------------------------------------------------------------------
describe.skipIf(!tritonclient)('qa/L0_backend_python/async_execute: concurrency_test.py', () => {
  let served: QaServer;
  beforeAll(async () => {
    const folder = await qaFolder('L0_backend_python/async_execute', ['concurrency_test.py']);
    const sh = shell(folder.cwd);
    await sh.mkdir('models');
    for (const name of ['async_execute_decouple', 'async_execute_decouple_bls']) {
      await sh.mkdir(`models/${name}/1`);
      await sh.cp(`../../python_models/${name}/model.py`, `models/${name}/1`);
      await sh.cp(`../../python_models/${name}/config.pbtxt`, `models/${name}`);
    }
    served = await serveQa(folder, 'models', 'concurrency_test.server.log');
  });
  afterAll(async () => {
    await served?.close();
  });

  // These sleep 8 to 14 s each (their own clocks measure the model's concurrency); each has its own
  // stream, so they run side by side here (about 14 s in all instead of 48 s).
  unittests(
    () => served,
    'concurrency_test',
    'ConcurrencyTest',
    [
      'test_concurrent_execute_single_request',
      'test_concurrent_execute_multi_request',
      'test_concurrent_execute_single_request_bls',
      'test_concurrent_execute_multi_request_bls',
      'test_concurrent_execute_different_duration',
      'test_model_raise_exception',
    ],
    { concurrent: true },
  );
});

// ---------------------------------------------------------------------------------------------------
// qa/L0_backend_python/bls/test.sh: its bls_parameters part (params_models)
// ---------------------------------------------------------------------------------------------------
describe.skipIf(!tritonclient)('qa/L0_backend_python/bls: bls_parameters_test.py', () => {
  let served: QaServer;
  beforeAll(async () => {
    const folder = await qaFolder('L0_backend_python/bls', ['bls_parameters_test.py']);
    const sh = shell(folder.cwd);
    await sh.mkdir('params_models/bls_parameters/1');
    await sh.cp('../../python_models/bls_parameters/model.py', './params_models/bls_parameters/1');
    await sh.cp('../../python_models/bls_parameters/config.pbtxt', './params_models/bls_parameters');
    served = await serveQa(folder, 'params_models', 'bls_parameters.server.log');
  });
  afterAll(async () => {
    await served?.close();
  });

  unittests(() => served, 'bls_parameters_test', 'TestBlsParameters', ['test_bls_parameters']);
});

// ---------------------------------------------------------------------------------------------------
// qa/L0_backend_python/parameters/test.sh
// ---------------------------------------------------------------------------------------------------
describe.skipIf(!tritonclient)('qa/L0_backend_python/parameters: response_parameters_test.py', () => {
  let served: QaServer;
  beforeAll(async () => {
    const folder = await qaFolder('L0_backend_python/parameters', ['response_parameters_test.py']);
    const sh = shell(folder.cwd);
    await sh.mkdir('models');
    for (const name of ['response_parameters', 'response_parameters_decoupled', 'response_parameters_bls']) {
      await sh.mkdir(`models/${name}/1`);
      await sh.cp(`../../python_models/${name}/model.py`, `models/${name}/1`);
      await sh.cp(`../../python_models/${name}/config.pbtxt`, `models/${name}`);
    }
    served = await serveQa(folder, 'models', 'response_parameters_test.server.log');
  });
  afterAll(async () => {
    await served?.close();
  });

  unittests(() => served, 'response_parameters_test', 'ResponseParametersTest', [
    'test_setting_empty_response_parameters',
    'test_setting_wrong_type_response_parameters',
    'test_setting_int_key_type_response_parameters',
    'test_setting_float_response_parameters',
    'test_setting_null_response_parameters',
    'test_setting_nested_response_parameters',
    'test_setting_one_element_response_parameters',
    'test_setting_three_element_response_parameters',
    'test_setting_multi_element_response_parameters',
    'test_setting_response_parameters_decoupled',
    'test_setting_response_parameters_bls',
  ]);
});

// ---------------------------------------------------------------------------------------------------
// qa/L0_backend_python/ensemble/test.sh (its TEST_WINDOWS=1 branch: no ensemble_gpu / libtorch model)
// ---------------------------------------------------------------------------------------------------
describe.skipIf(!tritonclient)('qa/L0_backend_python/ensemble: ensemble_test.py', () => {
  let served: QaServer;
  beforeAll(async () => {
    const folder = await qaFolder('L0_backend_python/ensemble', ['ensemble_test.py']);
    const sh = shell(folder.cwd);
    await sh.mkdir('models/ensemble/1/');
    await sh.cp('../../python_models/ensemble/config.pbtxt', './models/ensemble');
    await sh.mkdir('models/add_sub_1/1/');
    await sh.cp('../../python_models/add_sub/config.pbtxt', './models/add_sub_1');
    await sh.cp('../../python_models/add_sub/model.py', './models/add_sub_1/1/');
    await sh.mkdir('models/add_sub_2/1/');
    await sh.cp('../../python_models/add_sub/config.pbtxt', './models/add_sub_2/');
    await sh.cp('../../python_models/add_sub/model.py', './models/add_sub_2/1/');
    served = await serveQa(folder, 'models', 'ensemble_server.log');
  });
  afterAll(async () => {
    await served?.close();
  });

  unittests(() => served, 'ensemble_test', 'EnsembleTest', ['test_ensemble'], {
    skipped: { test_ensemble_gpu: "needs a GPU and Triton's libtorch qa model (test.sh builds it only where TEST_WINDOWS=0)" },
  });
});

// ---------------------------------------------------------------------------------------------------
// qa/L0_backend_python/io/test.sh: the repository of "IOTest.test_requested_output_default & ..."
// ---------------------------------------------------------------------------------------------------
describe.skipIf(!tritonclient)('qa/L0_backend_python/io: io_test.py', () => {
  let served: QaServer;
  beforeAll(async () => {
    const folder = await qaFolder('L0_backend_python/io', ['io_test.py']);
    const sh = shell(folder.cwd);
    await sh.mkdir('models');
    await sh.mkdir('models/add_sub/1/');
    await sh.cp('../../python_models/add_sub/model.py', './models/add_sub/1/');
    await sh.cp('../../python_models/add_sub/config.pbtxt', './models/add_sub/');
    // Left out: models/dlpack_io_identity_decoupled (its model.py imports torch).
    served = await serveQa(folder, 'models', 'io_server.log');
  });
  afterAll(async () => {
    await served?.close();
  });

  unittests(() => served, 'io_test', 'IOTest', ['test_requested_output_default'], {
    skipped: {
      test_requested_output_decoupled: 'dlpack_io_identity_decoupled imports torch (not installed; the model is not copied)',
      test_ensemble_io: 'dlpack_io_identity imports torch',
      test_empty_gpu_output: 'dlpack_empty_output imports torch and needs a GPU',
      test_variable_gpu_output: 'variable_gpu_output imports torch and needs a GPU',
      test_requested_output_decoupled_prior_crash: 'test.sh runs it on its own repository (next suite)',
    },
  });
});

// qa/L0_backend_python/io/test.sh: the repository of "IOTest.test_requested_output_decoupled_prior_crash"
describe.skipIf(!tritonclient)('qa/L0_backend_python/io: io_test.py (llm repository)', () => {
  let served: QaServer;
  beforeAll(async () => {
    const folder = await qaFolder('L0_backend_python/io', ['io_test.py']);
    await cp(join(UPSTREAM, 'qa/L0_backend_python/io/requested_output_model'), join(folder.cwd, 'requested_output_model'), {
      recursive: true,
    });
    const sh = shell(folder.cwd);
    await sh.mkdir('models');
    await sh.mkdir('models/llm/1/');
    await sh.cp('requested_output_model/config.pbtxt', 'models/llm/');
    await sh.cp('requested_output_model/model.py', 'models/llm/1/');
    served = await serveQa(folder, 'models', 'io_server.log');
  });
  afterAll(async () => {
    await served?.close();
  });

  unittests(() => served, 'io_test', 'IOTest', ['test_requested_output_decoupled_prior_crash']);
});

// ---------------------------------------------------------------------------------------------------
// qa/L0_http/test.sh: its generate endpoint part (the repository is qa/python_models/generate_models as is)
// ---------------------------------------------------------------------------------------------------
describe.skipIf(!tritonclient)('qa/L0_http: generate_endpoint_test.py (mock_llm)', () => {
  let served: QaServer;
  beforeAll(async () => {
    const folder = await qaFolder('L0_http', ['generate_endpoint_test.py']);
    served = await serveQa(folder, '../python_models/generate_models', 'inference_server_generate_endpoint_test.log');
  });
  afterAll(async () => {
    await served?.close();
  });

  const OPTIONAL =
    "mock_llm's input_ids is `optional: true`, which the python backend's model inputs drop (ioOfConfig): a request " +
    "without it is refused, 400 \"expected 3 inputs but got 2 inputs for model 'mock_llm'; missing 'input_ids'\"";
  const CONTENT_TYPE = 'JSON answers (and errors) come as Content-Type "application/json; charset=utf-8"; Triton sends "application/json"';
  const SSE = 'and it reads the stream with sseclient-py, which is not installed here (not in Debian)';
  unittests(
    () => served,
    'generate_endpoint_test',
    'GenerateEndpointTest',
    ['test_race_condition', 'test_close_connection_during_streaming'],
    {
      env: { QA_PLACEHOLDER_MODULES: 'ml_dtypes,sseclient' },
      skipped: {
        test_generate: `${OPTIONAL}; ${CONTENT_TYPE}`,
        test_generate_with_all_inputs: CONTENT_TYPE,
        test_request_id: `${OPTIONAL}; ${CONTENT_TYPE}`,
        test_generate_stream: `${OPTIONAL}; ${SSE}`,
        test_streaming: `${OPTIONAL}; ${SSE}`,
        test_missing_inputs: CONTENT_TYPE,
        test_invalid_input_types:
          `${CONTENT_TYPE}; and a non-string PROMPT is refused with "element 0 of BYTES input 'PROMPT' must be a string, got an object" ` +
          'where Triton says "attempt to access JSON non-string as string"',
        test_json_dtype_size_expansion_exceeds_limit_error: CONTENT_TYPE,
        test_duplicate_inputs: CONTENT_TYPE,
        test_generate_stream_response_error: `${OPTIONAL}; ${SSE}`,
        test_one_response: OPTIONAL,
        test_zero_response: OPTIONAL,
        test_many_response: OPTIONAL,
        test_complex_schema: `${OPTIONAL}; and the non-string PROMPT message differs (see test_invalid_input_types)`,
        test_parameters: `${OPTIONAL}; ${SSE}`,
        test_0_dimension_output: `${OPTIONAL}; ${CONTENT_TYPE}`,
      },
    },
  );
});
