/**
 * The GPU check's PyTorch step (issue 45): a Python-backend model (torch_mlp.py, beside this file
 * and in the pack beside check.js) that runs the check's ONNX MLP with torch on CUDA, its weights
 * exported from the ONNX file as .npy files beside model.py, and the probe for a python3 that has
 * torch with CUDA.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onnx } from '@batchwise/modelgen/graph-builder';

/** torch_mlp.py: beside this module in the sources, beside check.js in the pack. */
export const TORCH_MODEL_PY = fileURLToPath(new URL('./torch_mlp.py', import.meta.url));

/** An .npy file (format 1.0) of little-endian FP32 values in C order. */
export function npyBytes(shape: readonly number[], data: Float32Array): Buffer {
  const count = shape.reduce((n, d) => n * d, 1);
  if (count !== data.length) throw new Error(`shape [${shape.join(', ')}] holds ${count} values, not ${data.length}`);
  const dims = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  const dict = `{'descr': '<f4', 'fortran_order': False, 'shape': ${dims}, }`;
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to 64 bytes, ending in \n.
  const unpadded = 10 + dict.length + 1;
  const header = dict + ' '.repeat((64 - (unpadded % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.concat([head, Buffer.from(header, 'latin1'), body]);
}

/** FP32 initializers of an ONNX file, by name: what its graph was built with. */
export async function onnxInitializers(modelFile: string): Promise<Map<string, { dims: number[]; data: Float32Array }>> {
  const model = onnx.ModelProto.decode(await readFile(modelFile));
  const out = new Map<string, { dims: number[]; data: Float32Array }>();
  for (const t of model.graph?.initializer ?? []) {
    if (t.dataType !== onnx.TensorProto.DataType.FLOAT) continue;
    const dims = (t.dims ?? []).map(Number);
    let data: Float32Array;
    if (t.rawData && t.rawData.length > 0) {
      // Copied: the decoded buffer's offset need not be 4-byte aligned.
      data = new Float32Array(Uint8Array.from(t.rawData).buffer);
    } else data = Float32Array.from(t.floatData ?? []);
    out.set(t.name ?? '', { dims, data });
  }
  return out;
}

/**
 * Writes `<repo>/<name>/config.pbtxt` and version 1's model.py with the MLP's weights beside it:
 * w<l>.npy [fanIn, width] and b<l>.npy [width], as mlp() names its initializers. Returns the
 * number of layers and the bytes of weights written.
 */
export async function writeTorchModel(options: {
  readonly repo: string;
  readonly name: string;
  readonly onnxFile: string;
  readonly config: string;
}): Promise<{ layers: number; weightBytes: number }> {
  const version = join(options.repo, options.name, '1');
  await mkdir(version, { recursive: true });
  await writeFile(join(options.repo, options.name, 'config.pbtxt'), options.config);
  await copyFile(TORCH_MODEL_PY, join(version, 'model.py'));
  const initializers = await onnxInitializers(options.onnxFile);
  let layers = 0;
  let weightBytes = 0;
  while (initializers.has(`w${layers}`)) {
    for (const name of [`w${layers}`, `b${layers}`]) {
      const t = initializers.get(name);
      if (!t) throw new Error(`${options.onnxFile} has w${layers} but no ${name}: not an mlp() of @batchwise/modelgen`);
      await writeFile(join(version, `${name}.npy`), npyBytes(t.dims, t.data));
      weightBytes += t.data.byteLength;
    }
    layers++;
  }
  if (layers === 0) throw new Error(`${options.onnxFile} has no initializer w0: not an mlp() of @batchwise/modelgen`);
  return { layers, weightBytes };
}

export interface TorchProbe {
  readonly python: string;
  readonly ok: boolean;
  /** What the interpreter said: torch's and numpy's versions, CUDA's, the device; or why it could not. */
  readonly said: string;
}

const PROBE = [
  'import json, sys',
  'import numpy',
  'import torch',
  'cuda = torch.cuda.is_available()',
  'print(json.dumps({"python": sys.version.split()[0], "numpy": numpy.__version__, "torch": torch.__version__,',
  '  "cuda": torch.version.cuda, "available": cuda, "devices": torch.cuda.device_count() if cuda else 0,',
  '  "name": torch.cuda.get_device_name(0) if cuda else None}))',
].join('\n');

/**
 * Asks each interpreter (BATCHWISE_PYTHON, `python3` on PATH, /usr/bin/python3) whether it has
 * numpy and torch, and whether `torch.cuda.is_available()`. The first that does is the one the
 * Python backend is given (BATCHWISE_PYTHON); every answer is returned for the report.
 */
export async function probeTorch(): Promise<{ chosen?: string; probes: TorchProbe[] }> {
  const candidates = [...new Set([process.env['BATCHWISE_PYTHON'], 'python3', '/usr/bin/python3'].filter((p): p is string => !!p))];
  const probes: TorchProbe[] = [];
  for (const python of candidates) {
    const probe = await new Promise<TorchProbe>((resolve) =>
      execFile(python, ['-c', PROBE], { timeout: 120_000 }, (error, stdout, stderr) => {
        if (error) {
          // The interpreter's last word (ModuleNotFoundError: No module named 'torch'), or why it did not run.
          const last = `${stderr}`.trim().split('\n').at(-1);
          const code = (error as NodeJS.ErrnoException).code;
          const said = last || (code === 'ENOENT' ? 'not found' : error.message.split('\n')[0]!);
          resolve({ python, ok: false, said: said.slice(0, 400) });
          return;
        }
        const said = stdout.trim().split('\n').at(-1) ?? '';
        let available = false;
        try {
          available = (JSON.parse(said) as { available?: boolean }).available === true;
        } catch {
          // not JSON: reported as said
        }
        resolve({ python, ok: available, said: available ? said : `torch.cuda.is_available() is False: ${said}` });
      }),
    );
    probes.push(probe);
    if (probe.ok) return { chosen: python, probes };
  }
  return { probes };
}
