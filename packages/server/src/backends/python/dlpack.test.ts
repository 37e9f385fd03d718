import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { hostPython } from './interpreter.ts';

/**
 * pb_utils.Tensor's DLPack API (stub/_bw_dlpack.py) under Python's unittest, with each interpreter
 * here that has numpy (Debian's python3 with numpy 1.24, and a python3 on PATH, which may have numpy 2),
 * and against real PyTorch where an interpreter can import it.
 */
const run = promisify(execFile);
const TESTS = fileURLToPath(new URL('./stub-tests/', import.meta.url));

async function probe(python: string, module: string): Promise<string | undefined> {
  try {
    const { stdout } = await run(python, ['-c', `import sys, ${module}; print(sys.executable, ${module}.__version__)`], {
      timeout: 60_000,
    });
    return stdout.trim();
  } catch {
    return undefined;
  }
}

/** Interpreters with numpy, each once (by the executable they report). */
const withNumpy = new Map<string, string>();
for (const python of [hostPython(), 'python3']) {
  const found = await probe(python, 'numpy');
  if (found && ![...withNumpy.values()].some((v) => v.split(' ')[0] === found.split(' ')[0])) withNumpy.set(python, found);
}
const torchPython = (await Promise.all([hostPython(), 'python3'].map(async (p) => ((await probe(p, 'torch')) ? p : undefined)))).find(
  (p) => p !== undefined,
);

async function unittest(python: string, script: string): Promise<string> {
  try {
    const { stdout, stderr } = await run(python, [`${TESTS}${script}`], { timeout: 120_000 });
    return stdout + stderr;
  } catch (error) {
    const e = error as Error & { stdout?: string; stderr?: string };
    throw new Error(`${python} ${script} failed:\n${e.stdout ?? ''}${e.stderr ?? e.message}`);
  }
}

describe('the DLPack API of pb_utils.Tensor', () => {
  it('has an interpreter with numpy to test', () => {
    expect(withNumpy.size).toBeGreaterThan(0);
  });

  for (const [python, version] of withNumpy) {
    it(`passes its numpy tests on ${version}`, async () => {
      const output = await unittest(python, 'test_dlpack_numpy.py');
      expect(output).toMatch(/^OK/m);
    });
  }

  it.skipIf(torchPython === undefined)("passes Triton's PyTorch DLPack tests (GPU ones where CUDA is)", async () => {
    const output = await unittest(torchPython!, 'test_dlpack_torch.py');
    expect(output).toMatch(/^OK/m);
  });
});
