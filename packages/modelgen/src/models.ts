/**
 * The models the project needs, generated (never downloaded). Every model has a symbolic
 * `batch` first dimension unless said otherwise, and all weights come from a seeded PRNG, so
 * the same arguments always give the same bytes.
 */
import { GraphBuilder, onnxElemType, type Dim, type GraphDatatype, type ModelProto } from './graph-builder.ts';
import { mulberry32, uniformFloat32 } from './prng.ts';

export const BATCH_DIM = 'batch';

/**
 * Like Triton's example `simple`: INPUT0, INPUT1 INT32 [batch,16];
 * OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1.
 */
export function simpleAddSub(): ModelProto {
  const g = new GraphBuilder('simple');
  const dims = [BATCH_DIM, 16];
  g.input('INPUT0', 'INT32', dims);
  g.input('INPUT1', 'INT32', dims);
  g.op('Add', ['INPUT0', 'INPUT1'], 'OUTPUT0');
  g.op('Sub', ['INPUT0', 'INPUT1'], 'OUTPUT1');
  g.output('OUTPUT0', 'INT32', dims);
  g.output('OUTPUT1', 'INT32', dims);
  return g.build({ docString: 'OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1' });
}

/**
 * `simpleAddSub` on another datatype, as Triton's `simple_string` (decimal numbers as strings: BYTES) and
 * `simple_int8` (INT8) take it: each input cast to INT32, added and subtracted, and cast back. ONNX Runtime
 * parses and prints the strings; an INT8 result wraps as a C cast does.
 */
export function simpleAddSubThroughInt32(name: string, datatype: 'BYTES' | 'INT8'): ModelProto {
  const g = new GraphBuilder(name);
  const dims = [BATCH_DIM, 16];
  const back = { to: onnxElemType(datatype) };
  g.input('INPUT0', datatype, dims);
  g.input('INPUT1', datatype, dims);
  g.op('Cast', ['INPUT0'], 'input0_int32', { to: onnxElemType('INT32') });
  g.op('Cast', ['INPUT1'], 'input1_int32', { to: onnxElemType('INT32') });
  g.op('Add', ['input0_int32', 'input1_int32'], 'sum_int32');
  g.op('Sub', ['input0_int32', 'input1_int32'], 'difference_int32');
  g.op('Cast', ['sum_int32'], 'OUTPUT0', back);
  g.op('Cast', ['difference_int32'], 'OUTPUT1', back);
  g.output('OUTPUT0', datatype, dims);
  g.output('OUTPUT1', datatype, dims);
  return g.build({ docString: `OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, through INT32 (${datatype})` });
}

export interface IdentityOptions {
  /** @default 'INPUT0' */
  readonly inputName?: string;
  /** @default 'OUTPUT0' */
  readonly outputName?: string;
  /** Prepend a symbolic `batch` dimension to `dims`. @default true */
  readonly batch?: boolean;
}

/**
 * Identity for any datatype (`BYTES`/`STRING` is an ONNX string tensor). `dims` are the
 * per-item dims as in a Triton config (-1 = variable); a `batch` dim is prepended by default.
 */
export function identity(datatype: GraphDatatype, dims: readonly Dim[], options: IdentityOptions = {}): ModelProto {
  const { inputName = 'INPUT0', outputName = 'OUTPUT0', batch = true } = options;
  const itemDims = dims.map((d, i) => (d === -1 ? `dim_${i + 1}` : d));
  const full = batch ? [BATCH_DIM, ...itemDims] : itemDims;
  const g = new GraphBuilder(`identity_${datatype.toLowerCase()}`);
  g.input(inputName, datatype, full);
  g.op('Identity', [inputName], outputName);
  g.output(outputName, datatype, full);
  return g.build();
}

/** FP32 identity with a fixed first dim [2,4] and no batch dim, for validation tests. */
export function fixedBatchModel(): ModelProto {
  return identity('FP32', [2, 4], { batch: false });
}

export interface MlpOptions {
  /** Number of MatMul+Add+Relu layers. */
  readonly layers: number;
  /** Width of every layer and of the output. */
  readonly width: number;
  /** Features of INPUT0. @default width */
  readonly inputSize?: number;
  /** @default 1 */
  readonly seed?: number;
}

function checkPositiveInt(name: string, v: number): void {
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer, got ${v}`);
}

/**
 * FP32 MLP: `layers` x (MatMul + Add + Relu), INPUT0 [batch, inputSize] -> OUTPUT0
 * [batch, width]. He-uniform weights keep activations in range. Size is about
 * 4 * layers * width^2 bytes: the 4x2048 variant is about 67 MB (generate it, never commit).
 */
export function mlp(options: MlpOptions): ModelProto {
  const { layers, width, inputSize = width, seed = 1 } = options;
  checkPositiveInt('layers', layers);
  checkPositiveInt('width', width);
  checkPositiveInt('inputSize', inputSize);
  const next = mulberry32(seed);
  const g = new GraphBuilder(`mlp_${layers}x${width}`);
  let x = g.input('INPUT0', 'FP32', [BATCH_DIM, inputSize]);
  for (let l = 0; l < layers; l++) {
    const fanIn = l === 0 ? inputSize : width;
    const w = g.initializer(`w${l}`, 'FP32', [fanIn, width], uniformFloat32(next, fanIn * width, Math.sqrt(6 / fanIn)));
    const b = g.initializer(`b${l}`, 'FP32', [width], uniformFloat32(next, width, 0.01));
    const mm = g.op('MatMul', [x, w], `mm${l}`);
    const add = g.op('Add', [mm, b], `add${l}`);
    x = g.op('Relu', [add], l === layers - 1 ? 'OUTPUT0' : `relu${l}`);
  }
  g.output('OUTPUT0', 'FP32', [BATCH_DIM, width]);
  return g.build({ docString: `MLP ${layers}x${width}, seed ${seed}` });
}

export interface ConvNetOptions {
  /** @default 10 */
  readonly classes?: number;
  /** @default 1 */
  readonly seed?: number;
}

/**
 * A small vision-like FP32 conv net, about 22 KB:
 * INPUT0 [batch,3,32,32] -> Conv3x3(16) Relu MaxPool2 -> Conv3x3(32) Relu MaxPool2 ->
 * GlobalAveragePool -> Flatten -> Gemm -> OUTPUT0 [batch,classes].
 */
export function convNet(options: ConvNetOptions = {}): ModelProto {
  const { classes = 10, seed = 1 } = options;
  checkPositiveInt('classes', classes);
  const next = mulberry32(seed);
  const g = new GraphBuilder('convnet');
  let x = g.input('INPUT0', 'FP32', [BATCH_DIM, 3, 32, 32]);
  let cin = 3;
  for (const [i, cout] of [16, 32].entries()) {
    const fanIn = cin * 9;
    const w = g.initializer(`conv${i}_w`, 'FP32', [cout, cin, 3, 3], uniformFloat32(next, cout * fanIn, Math.sqrt(6 / fanIn)));
    const b = g.initializer(`conv${i}_b`, 'FP32', [cout], uniformFloat32(next, cout, 0.01));
    x = g.op('Conv', [x, w, b], `conv${i}`, { kernel_shape: [3, 3], pads: [1, 1, 1, 1] });
    x = g.op('Relu', [x], `relu${i}`);
    x = g.op('MaxPool', [x], `pool${i}`, { kernel_shape: [2, 2], strides: [2, 2] });
    cin = cout;
  }
  x = g.op('GlobalAveragePool', [x], 'gap');
  x = g.op('Flatten', [x], 'flat', { axis: 1 });
  const w = g.initializer('fc_w', 'FP32', [classes, cin], uniformFloat32(next, classes * cin, Math.sqrt(6 / cin)));
  const b = g.initializer('fc_b', 'FP32', [classes], uniformFloat32(next, classes, 0.01));
  g.op('Gemm', [x, w, b], 'OUTPUT0', { transB: 1 });
  g.output('OUTPUT0', 'FP32', [BATCH_DIM, classes]);
  return g.build({ docString: `small conv net, ${classes} classes, seed ${seed}` });
}

export interface SlowModelOptions {
  /**
   * How many MatMul+Tanh steps one run makes; run time grows linearly with it.
   * @default 4000
   */
  readonly repeats?: number;
  /** @default 1024 */
  readonly width?: number;
  /** @default 1 */
  readonly seed?: number;
}

/**
 * A model whose single run takes a long, controllable time on CPU, to prove that the event
 * loop is not blocked: INPUT0 [batch,width] -> Loop `repeats` times (MatMul with one
 * [width,width] weight, then Tanh) -> OUTPUT0 [batch,width]. A Loop keeps the graph three
 * nodes long, so the session loads in milliseconds and the file stays about 4 * width^2 bytes
 * (4 MB at the default width) however long it runs.
 *
 * Rough run time with onnxruntime-node 1.30 on the 2-core dev machine, width 1024: about
 * 0.045 ms per repeat at batch 1 and 0.1 ms at batch 8, so the defaults (4000 repeats) take
 * about 175 ms at batch 1 and 420 ms at batch 8; 400 repeats about 15 ms. Session load takes
 * well under 100 ms.
 */
export function slowModel(options: SlowModelOptions = {}): ModelProto {
  const { repeats = 4000, width = 1024, seed = 1 } = options;
  checkPositiveInt('repeats', repeats);
  checkPositiveInt('width', width);
  const next = mulberry32(seed);

  const body = new GraphBuilder('slow_body');
  body.input('iter', 'INT64', []);
  body.input('cond_in', 'BOOL', []);
  body.input('x_in', 'FP32', [BATCH_DIM, width]);
  body.op('Identity', ['cond_in'], 'cond_out');
  body.op('MatMul', ['x_in', 'w'], 'mm');
  body.op('Tanh', ['mm'], 'x_out');
  body.output('cond_out', 'BOOL', []);
  body.output('x_out', 'FP32', [BATCH_DIM, width]);

  const g = new GraphBuilder(`slow_${repeats}x${width}`);
  g.input('INPUT0', 'FP32', [BATCH_DIM, width]);
  g.initializer('w', 'FP32', [width, width], uniformFloat32(next, width * width, Math.sqrt(3 / width)));
  g.initializer('repeats', 'INT64', [], new BigInt64Array([BigInt(repeats)]));
  g.initializer('cond', 'BOOL', [], new Uint8Array([1]));
  g.op('Loop', ['repeats', 'cond', 'INPUT0'], 'OUTPUT0', { body: { graph: body.graph() } });
  g.output('OUTPUT0', 'FP32', [BATCH_DIM, width]);
  return g.build({ docString: `slow model: ${repeats} x (MatMul[${width}x${width}] + Tanh), seed ${seed}` });
}

/** INPUT0 FP32 [batch, -1] -> OUTPUT0 = INPUT0 * factor: the two versions the bls_router example chooses between. */
export function scaler(factor: number): ModelProto {
  const g = new GraphBuilder('scaler');
  const dims = [BATCH_DIM, 'size'];
  g.input('INPUT0', 'FP32', dims);
  g.initializer('factor', 'FP32', [], new Float32Array([factor]));
  g.op('Mul', ['INPUT0', 'factor'], 'OUTPUT0');
  g.output('OUTPUT0', 'FP32', dims);
  return g.build({ docString: `OUTPUT0 = INPUT0 * ${factor}` });
}
