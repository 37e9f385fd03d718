/**
 * What a command prints is its own answer, in its own words: nothing raw from the libraries under
 * it (ONNX Runtime's C++ log, the AWS SDK's warnings and errors) on a newcomer's first run (issue 35).
 * Every command runs through the compiled CLI, as the image runs it.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './support/cli.ts';

const ORT_BINDING_DIR = join(
  dirname(createRequire(new URL('../packages/server/', import.meta.url)).resolve('onnxruntime-node')),
  '..',
  'bin',
  'napi-v6',
  process.platform,
  process.arch,
);
const CUDA_PROVIDER_INSTALLED = existsSync(join(ORT_BINDING_DIR, 'libonnxruntime_providers_shared.so'));

describe('batchwise doctor', () => {
  it.skipIf(CUDA_PROVIDER_INSTALLED)(
    "on a host without ONNX Runtime's CUDA provider: its table says so once, in words, and ORT's own error is not printed",
    async () => {
      const run = await runCli(['doctor', '--server-metrics', 'http://127.0.0.1:9/metrics']);
      // ORT's log line: "\x1b[1;31m<time> [E:onnxruntime:onnxruntime-node, provider_bridge_ort.cc:...] ... Failed to load library ..."
      expect(run.stderr).not.toMatch(/onnxruntime|provider_bridge|\u001b\[/);
      expect(run.stdout).not.toMatch(/provider_bridge|\u001b\[/);
      // The TensorRT row names the same missing library: the CUDA provider's own row says it once.
      const cuda = run.stdout.split('\n').filter((line) => /^\S+ +cuda-execution-provider /.test(line));
      expect(cuda).toEqual([
        expect.stringMatching(
          /^(warn|FAIL) +cuda-execution-provider +KIND_GPU requires the CUDA execution provider, which could not be used: .*onnxruntime-node was installed without its CUDA provider: .* has no libonnxruntime_providers_shared\.so/,
        ),
      ]);
    },
  );
});
