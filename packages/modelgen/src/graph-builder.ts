/**
 * A small ONNX graph builder on top of `onnx-proto` (protobufjs static code, ONNX 1.10).
 *
 * Quirks of onnx-proto worth knowing (they are handled here, so callers never see them):
 * - The package is CommonJS with one `onnx` namespace on its default export:
 *   `import onnxProto from 'onnx-proto'; const { onnx } = onnxProto;`.
 * - int64 fields (`irVersion`, `version`, `dims`, `dimValue`, attribute `i`/`ints`) accept
 *   plain JS numbers when encoding. When *decoding*, protobufjs 6 returns them as `Long`
 *   objects (the `long` package is installed); use `Number(x)` or
 *   `onnx.ModelProto.toObject(m, { longs: Number })` to read them.
 * - Attribute values need their `type` set explicitly (`AttributeType.INT`, ...); ONNX
 *   Runtime rejects attributes whose type is UNDEFINED.
 * - A dynamic dimension is a `Dimension` with `dimParam` (named) or with neither field set.
 */
import onnxProto from 'onnx-proto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { endianness } from 'node:os';

export const { onnx } = onnxProto;
export type ModelProto = onnxProto.onnx.ModelProto;
export type IModelProto = onnxProto.onnx.IModelProto;

export const DEFAULT_IR_VERSION = 8;
export const DEFAULT_OPSET = 17;
export const PRODUCER_NAME = 'batchwise-modelgen';
export const PRODUCER_VERSION = '0.1.0';

/** KServe v2 / Triton wire datatype names. `STRING` is accepted as an alias of `BYTES`. */
export type TensorDatatype =
  'BOOL' | 'UINT8' | 'UINT16' | 'UINT32' | 'UINT64' | 'INT8' | 'INT16' | 'INT32' | 'INT64' | 'FP16' | 'FP32' | 'FP64' | 'BYTES';

export const TENSOR_DATATYPES: readonly TensorDatatype[] = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BYTES',
];

/**
 * What a graph's inputs and outputs may be declared as: the datatypes above, `STRING` (an alias
 * of `BYTES`) and BF16, which onnxruntime-node cannot load (it has no bfloat16 tensors), so
 * models with it only serve to test that the server refuses them.
 */
export type GraphDatatype = TensorDatatype | 'STRING' | 'BF16';

const ELEM_TYPES: Record<TensorDatatype | 'BF16', number> = {
  BOOL: onnx.TensorProto.DataType.BOOL,
  UINT8: onnx.TensorProto.DataType.UINT8,
  UINT16: onnx.TensorProto.DataType.UINT16,
  UINT32: onnx.TensorProto.DataType.UINT32,
  UINT64: onnx.TensorProto.DataType.UINT64,
  INT8: onnx.TensorProto.DataType.INT8,
  INT16: onnx.TensorProto.DataType.INT16,
  INT32: onnx.TensorProto.DataType.INT32,
  INT64: onnx.TensorProto.DataType.INT64,
  FP16: onnx.TensorProto.DataType.FLOAT16,
  FP32: onnx.TensorProto.DataType.FLOAT,
  FP64: onnx.TensorProto.DataType.DOUBLE,
  BF16: onnx.TensorProto.DataType.BFLOAT16,
  BYTES: onnx.TensorProto.DataType.STRING,
};

/** ONNX `TensorProto.DataType` number for a KServe datatype name (`STRING` = `BYTES`). */
export function onnxElemType(datatype: GraphDatatype): number {
  const t = ELEM_TYPES[datatype === 'STRING' ? 'BYTES' : datatype];
  if (t === undefined) throw new Error(`unsupported datatype '${datatype}'`);
  return t;
}

/** Triton config.pbtxt data_type for a KServe datatype name, e.g. FP32 -> TYPE_FP32. */
export function tritonConfigType(datatype: TensorDatatype | 'STRING'): string {
  return datatype === 'BYTES' || datatype === 'STRING' ? 'TYPE_STRING' : `TYPE_${datatype}`;
}

/**
 * One dimension of a graph input or output: a fixed size, a symbolic name
 * (e.g. `'batch'`), or -1 for an anonymous dynamic dimension.
 */
export type Dim = number | string;

export interface ValueInfo {
  readonly name: string;
  readonly datatype: GraphDatatype;
  readonly dims: readonly Dim[];
}

export type AttributeValue =
  number | string | readonly number[] | { readonly float: number } | { readonly graph: onnxProto.onnx.IGraphProto };

export interface NodeSpec {
  readonly op: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  /** @default - `<op>_<index>` */
  readonly name?: string;
  /**
   * Integers are INT, arrays of integers INTS, strings STRING; wrap a float that happens to be
   * an integer as `{ float: 1 }`. Non-integer numbers are FLOAT. `{ graph }` is a subgraph
   * (the `body` of Loop, the branches of If): build it with `GraphBuilder.graph()`.
   */
  readonly attributes?: Readonly<Record<string, AttributeValue>>;
}

export type InitializerData =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

function dimProto(d: Dim): onnxProto.onnx.TensorShapeProto.IDimension {
  if (typeof d === 'string') return { dimParam: d };
  if (d === -1) return {};
  if (!Number.isInteger(d) || d < 0) throw new Error(`invalid dimension ${d}`);
  return { dimValue: d };
}

function valueInfoProto(v: ValueInfo): onnxProto.onnx.IValueInfoProto {
  return {
    name: v.name,
    type: {
      tensorType: {
        elemType: onnxElemType(v.datatype),
        shape: { dim: v.dims.map(dimProto) },
      },
    },
  };
}

function isIntList(v: AttributeValue): v is readonly number[] {
  return Array.isArray(v);
}

function attributeProto(name: string, v: AttributeValue): onnxProto.onnx.IAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof v === 'string') return { name, type: T.STRING, s: new TextEncoder().encode(v) };
  if (typeof v === 'number') {
    return Number.isInteger(v) ? { name, type: T.INT, i: v } : { name, type: T.FLOAT, f: v };
  }
  if (isIntList(v)) return { name, type: T.INTS, ints: [...v] };
  if ('graph' in v) return { name, type: T.GRAPH, g: v.graph };
  return { name, type: T.FLOAT, f: v.float };
}

function rawBytes(data: InitializerData): Uint8Array {
  // ONNX raw_data is little-endian; typed arrays use the host order.
  if (endianness() !== 'LE') throw new Error('modelgen requires a little-endian host');
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * Builds one ONNX graph. Inputs and outputs are declared with KServe datatype names; nodes are
 * added in topological order; initializers are stored as raw_data.
 */
export class GraphBuilder {
  private readonly inputs: onnxProto.onnx.IValueInfoProto[] = [];
  private readonly outputs: onnxProto.onnx.IValueInfoProto[] = [];
  private readonly nodes: onnxProto.onnx.INodeProto[] = [];
  private readonly initializers: onnxProto.onnx.ITensorProto[] = [];
  private readonly names = new Set<string>();

  constructor(readonly graphName: string) {}

  input(name: string, datatype: GraphDatatype, dims: readonly Dim[]): string {
    this.inputs.push(valueInfoProto({ name, datatype, dims }));
    return name;
  }

  output(name: string, datatype: GraphDatatype, dims: readonly Dim[]): string {
    this.outputs.push(valueInfoProto({ name, datatype, dims }));
    return name;
  }

  /** Adds a constant tensor; returns its name. */
  initializer(name: string, datatype: Exclude<TensorDatatype, 'BYTES'>, dims: readonly number[], data: InitializerData): string {
    const count = dims.reduce((a, b) => a * b, 1);
    if (count !== data.length) {
      throw new Error(`initializer '${name}': dims [${dims}] need ${count} values, got ${data.length}`);
    }
    this.initializers.push({
      name,
      dataType: onnxElemType(datatype),
      dims: [...dims],
      rawData: rawBytes(data),
    });
    return name;
  }

  /** Adds a node; returns its first output name. */
  node(spec: NodeSpec): string {
    const name = spec.name ?? `${spec.op}_${this.nodes.length}`;
    if (this.names.has(name)) throw new Error(`duplicate node name '${name}'`);
    this.names.add(name);
    this.nodes.push({
      name,
      opType: spec.op,
      input: [...spec.inputs],
      output: [...spec.outputs],
      attribute: Object.entries(spec.attributes ?? {}).map(([k, v]) => attributeProto(k, v)),
    });
    return spec.outputs[0];
  }

  /** Shorthand for a single-output node. */
  op(op: string, inputs: readonly string[], output: string, attributes?: NodeSpec['attributes']): string {
    return this.node({ op, inputs, outputs: [output], attributes });
  }

  /** The graph alone, e.g. as the body of a Loop (it may use names of the outer graph). */
  graph(): onnxProto.onnx.IGraphProto {
    return {
      name: this.graphName,
      node: this.nodes,
      initializer: this.initializers,
      input: this.inputs,
      output: this.outputs,
    };
  }

  build(options: ModelOptions = {}): ModelProto {
    return onnx.ModelProto.create({
      irVersion: options.irVersion ?? DEFAULT_IR_VERSION,
      opsetImport: [{ domain: '', version: options.opset ?? DEFAULT_OPSET }],
      producerName: PRODUCER_NAME,
      producerVersion: PRODUCER_VERSION,
      docString: options.docString ?? '',
      graph: this.graph(),
    });
  }
}

export interface ModelOptions {
  /** @default 8 */
  readonly irVersion?: number;
  /** @default 17 */
  readonly opset?: number;
  /** @default - empty */
  readonly docString?: string;
}

export function serializeModel(model: IModelProto): Uint8Array {
  return onnx.ModelProto.encode(model).finish();
}

export function parseModel(bytes: Uint8Array): ModelProto {
  return onnx.ModelProto.decode(bytes);
}

/** Serializes the model and writes it, creating parent folders. Returns the byte count. */
export async function writeModel(path: string, model: IModelProto): Promise<number> {
  const bytes = serializeModel(model);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, bytes);
  return bytes.byteLength;
}
