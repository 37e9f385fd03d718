import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { hostPython } from './interpreter.ts';

export interface HostPython {
  readonly python: string;
  /** Python's version, e.g. '3.11.2'; undefined when the interpreter did not run. */
  readonly version?: string;
  /** numpy's version; undefined when it cannot be imported. */
  readonly numpy?: string;
  /** Why the interpreter or numpy is missing, in words. */
  readonly problem?: string;
}

/** Which Python and numpy the Python backend's models run on here (doctor's check). */
export async function probeHostPython(python = hostPython()): Promise<HostPython> {
  const script =
    'import sys\ntry:\n import numpy; n = numpy.__version__\nexcept Exception as e:\n n = ""\nprint(sys.version.split()[0], n)';
  try {
    const { stdout } = await promisify(execFile)(python, ['-c', script], { timeout: 30_000 });
    const [version, numpy] = stdout.trim().split(' ');
    if (!numpy) return { python, version, problem: `numpy cannot be imported by ${python} (apt-get install python3-numpy)` };
    return { python, version, numpy };
  } catch (error) {
    return {
      python,
      problem: `${python} does not run: ${(error as Error).message.split('\n')[0]} (apt-get install python3 python3-numpy)`,
    };
  }
}
