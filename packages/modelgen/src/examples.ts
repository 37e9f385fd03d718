/**
 * The example model repository (`examples/model_repository`), in Triton's layout:
 * `<model>/config.pbtxt` and `<model>/1/model.onnx`. The files are committed; a test checks
 * that regenerating them gives the same bytes.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { serializeModel, tritonConfigType, type ModelProto, type TensorDatatype } from './graph-builder.ts';
import { convNet, identity, simpleAddSub } from './models.ts';

interface TensorConfig {
  readonly name: string;
  readonly datatype: TensorDatatype;
  readonly dims: readonly number[];
}

interface ConfigSpec {
  readonly name: string;
  readonly maxBatchSize: number;
  readonly inputs: readonly TensorConfig[];
  readonly outputs: readonly TensorConfig[];
  readonly maxQueueDelayMicroseconds?: number;
  readonly instanceCount?: number;
}

function tensorsText(key: 'input' | 'output', tensors: readonly TensorConfig[]): string {
  const items = tensors.map(
    (t) => `  {\n    name: "${t.name}"\n    data_type: ${tritonConfigType(t.datatype)}\n    dims: [ ${t.dims.join(', ')} ]\n  }`,
  );
  return `${key} [\n${items.join(',\n')}\n]\n`;
}

/** config.pbtxt text in Triton's usual formatting. */
export function configPbtxt(spec: ConfigSpec): string {
  let text = `name: "${spec.name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: ${spec.maxBatchSize}\n`;
  text += tensorsText('input', spec.inputs);
  text += tensorsText('output', spec.outputs);
  if (spec.maxQueueDelayMicroseconds !== undefined) {
    text += `dynamic_batching {\n  max_queue_delay_microseconds: ${spec.maxQueueDelayMicroseconds}\n}\n`;
  }
  text += `instance_group [\n  {\n    count: ${spec.instanceCount ?? 1}\n    kind: KIND_CPU\n  }\n]\n`;
  return text;
}

export interface ExampleModel {
  readonly name: string;
  /** config.pbtxt text; absent for a model the server must auto-complete. */
  readonly config?: string;
  readonly model: () => ModelProto;
}

/** The models of the example repository, each at version 1. */
export const EXAMPLE_MODELS: readonly ExampleModel[] = [
  {
    name: 'simple',
    model: simpleAddSub,
    config: configPbtxt({
      name: 'simple',
      maxBatchSize: 8,
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', dims: [16] },
        { name: 'INPUT1', datatype: 'INT32', dims: [16] },
      ],
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', dims: [16] },
        { name: 'OUTPUT1', datatype: 'INT32', dims: [16] },
      ],
      maxQueueDelayMicroseconds: 100,
    }),
  },
  {
    name: 'identity_fp32',
    model: () => identity('FP32', [-1]),
    config: configPbtxt({
      name: 'identity_fp32',
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [-1] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', dims: [-1] }],
    }),
  },
  {
    name: 'identity_bytes',
    model: () => identity('BYTES', [1]),
    config: configPbtxt({
      name: 'identity_bytes',
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', dims: [1] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'BYTES', dims: [1] }],
    }),
  },
  {
    // No config.pbtxt: the server must auto-complete it from the ONNX model.
    name: 'autocomplete_fp32',
    model: () => identity('FP32', [4]),
  },
  {
    name: 'convnet',
    model: () => convNet(),
    config: configPbtxt({
      name: 'convnet',
      maxBatchSize: 16,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [3, 32, 32] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', dims: [10] }],
      maxQueueDelayMicroseconds: 500,
    }),
  },
];

export interface WrittenFile {
  readonly model: string;
  /** Path relative to the repository folder. */
  readonly path: string;
  readonly bytes: number;
}

/**
 * Writes the example repository into `dir` (creating it). Only the example models' folders are
 * touched; other models in `dir` are left alone. `onFile` is called once per file written.
 */
export async function writeExampleRepository(dir: string, onFile: (file: WrittenFile) => void = () => {}): Promise<WrittenFile[]> {
  const written: WrittenFile[] = [];
  const put = async (model: string, rel: string, data: Uint8Array | string): Promise<void> => {
    const full = join(dir, rel);
    await mkdir(join(full, '..'), { recursive: true });
    await writeFile(full, data);
    const file = { model, path: rel, bytes: typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength };
    written.push(file);
    onFile(file);
  };
  for (const ex of EXAMPLE_MODELS) {
    if (ex.config !== undefined) await put(ex.name, join(ex.name, 'config.pbtxt'), ex.config);
    await put(ex.name, join(ex.name, '1', 'model.onnx'), serializeModel(ex.model()));
  }
  return written;
}
