/**
 * Triton's own Python gRPC client (tritonclient.grpc, unchanged) streaming a decoupled model:
 * repeat_int32, ported from Triton's qa/L0_decoupled, and L0_decoupled's ensembles around it
 * (simple_repeat, sequence_repeat), with and without empty final responses
 * (test/support/triton/stream_repeat.py). Needs the client that ../shared/tools/setup-triton-client.sh
 * builds (TRITON_CLIENT_DIR, default ~/.cache/tritonclient); skipped with a warning without it.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { L0_DECOUPLED_MODELS } from './support/decoupled-ensembles.ts';
import { serveModels, type ServedModels } from './support/server.ts';

const CLIENT_DIR = process.env['TRITON_CLIENT_DIR'] ?? join(homedir(), '.cache', 'tritonclient');
const PYTHON_PATH = join(CLIENT_DIR, 'py');
const SCRIPT = new URL('./support/triton/stream_repeat.py', import.meta.url).pathname;
const present = existsSync(join(PYTHON_PATH, 'tritonclient', 'grpc'));
if (!present)
  console.warn(`SKIPPED (Triton's Python client missing at ${PYTHON_PATH}): build it with ../shared/tools/setup-triton-client.sh`);

describe.skipIf(!present)("Triton's Python gRPC client streams a decoupled model", () => {
  let served: ServedModels;
  beforeAll(async () => {
    served = await serveModels(L0_DECOUPLED_MODELS);
  });
  afterAll(async () => {
    await served?.close();
  });

  it.each(['repeat_int32', 'simple_repeat', 'sequence_repeat'])(
    '%s: zero, one and many responses, with triton_final_response and empty final responses on request',
    async (model) => {
      const { stdout } = await promisify(execFile)('/usr/bin/python3', [SCRIPT, `127.0.0.1:${served.server.grpcPort}`, model], {
        env: { ...process.env, PYTHONPATH: PYTHON_PATH },
        timeout: 60_000,
      });
      expect(JSON.parse(stdout)).toEqual({
        // Empty final responses asked for: each request ends with one, which carries no outputs.
        none: [[null, null, true]],
        one: [
          [100, 0, false],
          [null, null, true],
        ],
        many: [
          [100, 0, false],
          [101, 1, false],
          [102, 2, false],
          [103, 3, false],
          [104, 4, false],
          [null, null, true],
        ],
        // Not asked for: the model's flag-only final response is not sent.
        plain: [
          [100, 0, false],
          [101, 1, false],
          [102, 2, false],
        ],
      });
    },
  );
});
