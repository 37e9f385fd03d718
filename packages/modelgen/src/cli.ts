/**
 * modelgen CLI. Prints one JSON line per file written.
 *
 *   tsx packages/modelgen/src/cli.ts examples <dir>
 *   tsx packages/modelgen/src/cli.ts mlp <out.onnx> --layers 4 --width 2048 [--input-size N] [--seed N]
 *   tsx packages/modelgen/src/cli.ts simple <out.onnx>
 *   tsx packages/modelgen/src/cli.ts identity <out.onnx> --datatype FP32 [--dims 16,-1] [--no-batch]
 *   tsx packages/modelgen/src/cli.ts convnet <out.onnx> [--classes 10] [--seed N]
 *   tsx packages/modelgen/src/cli.ts slow <out.onnx> [--repeats 4000] [--width 1024] [--seed N]
 *   tsx packages/modelgen/src/cli.ts fixed_batch <out.onnx>
 */
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { TENSOR_DATATYPES, writeModel, type ModelProto, type TensorDatatype } from './graph-builder.ts';
import { writeExampleRepository } from './examples.ts';
import { convNet, fixedBatchModel, identity, mlp, simpleAddSub, slowModel } from './models.ts';

const USAGE = `usage:
  modelgen examples <dir>
  modelgen mlp <out.onnx> --layers N --width N [--input-size N] [--seed N]
  modelgen simple <out.onnx>
  modelgen identity <out.onnx> --datatype T [--dims 16,-1] [--no-batch]
  modelgen convnet <out.onnx> [--classes N] [--seed N]
  modelgen slow <out.onnx> [--repeats N] [--width N] [--seed N]
  modelgen fixed_batch <out.onnx>`;

type Values = Record<string, string | boolean | undefined>;

function int(values: Values, name: string): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== 'string' || !Number.isInteger(n)) throw new Error(`--${name} must be an integer, got '${v}'`);
  return n;
}

function required(values: Values, name: string): number {
  const n = int(values, name);
  if (n === undefined) throw new Error(`--${name} is required`);
  return n;
}

const BUILDERS: Record<string, (v: Values) => ModelProto> = {
  simple: () => simpleAddSub(),
  fixed_batch: () => fixedBatchModel(),
  mlp: (v) => mlp({ layers: required(v, 'layers'), width: required(v, 'width'), inputSize: int(v, 'input-size'), seed: int(v, 'seed') }),
  convnet: (v) => convNet({ classes: int(v, 'classes'), seed: int(v, 'seed') }),
  slow: (v) => slowModel({ repeats: int(v, 'repeats'), width: int(v, 'width'), seed: int(v, 'seed') }),
  identity: (v) => {
    const datatype = String(v.datatype ?? '').toUpperCase();
    const dt = datatype === 'STRING' ? 'BYTES' : datatype;
    if (!TENSOR_DATATYPES.includes(dt as TensorDatatype)) {
      throw new Error(`--datatype must be one of ${TENSOR_DATATYPES.join(', ')}, got '${v.datatype ?? ''}'`);
    }
    const dims = String(v.dims ?? '16')
      .split(',')
      .map(Number);
    if (dims.some((d) => !Number.isInteger(d) || d < -1)) throw new Error(`--dims must be integers >= -1, got '${v.dims}'`);
    return identity(dt as TensorDatatype, dims, { batch: v['no-batch'] !== true });
  },
};

export async function main(argv: readonly string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      layers: { type: 'string' },
      width: { type: 'string' },
      'input-size': { type: 'string' },
      seed: { type: 'string' },
      classes: { type: 'string' },
      repeats: { type: 'string' },
      datatype: { type: 'string' },
      dims: { type: 'string' },
      'no-batch': { type: 'boolean' },
    },
  });
  const [command, out] = positionals;
  if (command === undefined || out === undefined || positionals.length > 2) throw new Error(USAGE);
  if (command === 'examples') {
    await writeExampleRepository(out, (f) => console.log(JSON.stringify({ event: 'wrote', ...f })));
    return;
  }
  const build = Object.hasOwn(BUILDERS, command) ? BUILDERS[command] : undefined;
  if (build === undefined) throw new Error(`unknown model '${command}'\n${USAGE}`);
  const bytes = await writeModel(out, build(values));
  console.log(JSON.stringify({ event: 'wrote', model: command, path: out, bytes }));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  });
}
