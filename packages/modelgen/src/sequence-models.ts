/**
 * Stateful models for the sequence batcher (sequence_batching): Triton's two sequence examples as
 * its docs/examples ship them in ONNX, a model that echoes its control inputs, and models with
 * implicit state. Every one has a symbolic `batch` first dimension.
 */
import { GraphBuilder, type GraphDatatype, type ModelProto } from './graph-builder.ts';
import { BATCH_DIM } from './models.ts';
import { mulberry32, uniformFloat32 } from './prng.ts';

/** ONNX's TensorProto.DataType codes for the Cast nodes below. */
const ONNX_INT32 = 6;

/**
 * Triton's docs/examples `simple_sequence` (ONNX): INPUT, START and READY INT32 [batch,1];
 * OUTPUT = READY * (INPUT + START), the same nodes as Triton's file.
 */
export function tritonSimpleSequence(): ModelProto {
  const g = new GraphBuilder('onnx_sequence_int32');
  const dims = [BATCH_DIM, 1];
  for (const name of ['INPUT', 'START', 'READY']) g.input(name, 'INT32', dims);
  g.op('Identity', ['INPUT'], '_INPUT');
  g.op('Add', ['_INPUT', 'START'], 'add');
  g.op('Mul', ['READY', 'add'], 'CAST');
  g.op('Cast', ['CAST'], 'OUTPUT', { to: ONNX_INT32 });
  g.output('OUTPUT', 'INT32', dims);
  return g.build({ docString: 'OUTPUT = READY * (INPUT + START)' });
}

/**
 * Triton's docs/examples `simple_dyna_sequence` (ONNX): also END INT32 and CORRID UINT64;
 * OUTPUT = READY * (INPUT + START + END * CORRID), so the last request of a sequence adds its id.
 */
export function tritonSimpleDynaSequence(): ModelProto {
  const g = new GraphBuilder('onnx_dyna_sequence_int32');
  const dims = [BATCH_DIM, 1];
  for (const name of ['INPUT', 'START', 'END', 'READY']) g.input(name, 'INT32', dims);
  g.input('CORRID', 'UINT64', dims);
  g.op('Identity', ['INPUT'], '_INPUT');
  g.op('Cast', ['CORRID'], 'onnx_corrid_cast0', { to: ONNX_INT32 });
  g.op('Add', ['_INPUT', 'START'], 'add0');
  g.op('Mul', ['END', 'onnx_corrid_cast0'], 'mul0');
  g.op('Add', ['add0', 'mul0'], 'sum0');
  g.op('Mul', ['READY', 'sum0'], 'CAST');
  g.op('Cast', ['CAST'], 'OUTPUT', { to: ONNX_INT32 });
  g.output('OUTPUT', 'INT32', dims);
  return g.build({ docString: 'OUTPUT = READY * (INPUT + START + END * CORRID)' });
}

export interface ControlEchoOptions {
  readonly start?: 'INT32' | 'FP32' | 'BOOL';
  readonly end?: 'INT32' | 'FP32' | 'BOOL';
  readonly ready?: 'INT32' | 'FP32' | 'BOOL';
  readonly corrid?: 'UINT64' | 'INT64' | 'UINT32' | 'INT32' | 'BYTES';
  /** Prepend the `batch` dimension. @default true */
  readonly batch?: boolean;
}

/**
 * Passes INPUT (INT32 [1]) to OUTPUT and each control input it has (START, END, READY, CORRID, of
 * the given datatypes, [1]) to `<name>_OUT`: what the sequence batcher fed each slot, as it fed it.
 */
export function controlEcho(options: ControlEchoOptions): ModelProto {
  const g = new GraphBuilder('control_echo');
  const dims = options.batch === false ? [1] : [BATCH_DIM, 1];
  g.input('INPUT', 'INT32', dims);
  g.op('Identity', ['INPUT'], 'OUTPUT');
  g.output('OUTPUT', 'INT32', dims);
  const controls: [string, GraphDatatype | undefined][] = [
    ['START', options.start],
    ['END', options.end],
    ['READY', options.ready],
    ['CORRID', options.corrid],
  ];
  for (const [name, datatype] of controls) {
    if (datatype === undefined) continue;
    g.input(name, datatype, dims);
    g.op('Identity', [name], `${name}_OUT`);
    g.output(`${name}_OUT`, datatype, dims);
  }
  return g.build({ docString: 'OUTPUT = INPUT; <control>_OUT = <control>' });
}

/**
 * A running sum with implicit state (Triton's implicit state accumulator): INPUT FP32 [width],
 * state ACC_IN -> ACC_OUT FP32 [width]; OUTPUT = ACC_OUT = ACC_IN + INPUT. The server keeps ACC per
 * sequence and starts it from its initial state on START.
 */
export function runningSum(width: number): ModelProto {
  const g = new GraphBuilder('running_sum');
  const dims = [BATCH_DIM, width];
  g.input('INPUT', 'FP32', dims);
  g.input('ACC_IN', 'FP32', dims);
  g.op('Add', ['ACC_IN', 'INPUT'], 'ACC_OUT');
  g.op('Identity', ['ACC_OUT'], 'OUTPUT');
  g.output('OUTPUT', 'FP32', dims);
  g.output('ACC_OUT', 'FP32', dims);
  return g.build({ docString: 'OUTPUT = ACC_OUT = ACC_IN + INPUT (ACC is implicit state)' });
}

/**
 * Every control and two implicit states, in element-wise operations only (a batch computes each row
 * exactly as a batch of one does): INPUT FP32 [width]; START, END, READY FP32 [1] (0 or 1); CORRID
 * UINT64 or BYTES [1]; states STATE (FP32 [width]) and STEP (INT32 [1]).
 *   STATE_OUT = STATE_IN * (1 - START) + INPUT       (a START starts the sum over)
 *   STEP_OUT  = STEP_IN * (1 - START) + READY        (requests run in this sequence)
 *   OUTPUT = STATE_OUT + END, OUT_STEP = STEP_OUT, OUT_CORRID = CORRID
 */
export function sequenceStateModel(width: number, corrid: 'UINT64' | 'BYTES'): ModelProto {
  const g = new GraphBuilder('sequence_state');
  const row = [BATCH_DIM, 1];
  g.input('INPUT', 'FP32', [BATCH_DIM, width]);
  for (const name of ['START', 'END', 'READY']) g.input(name, 'FP32', row);
  g.input('CORRID', corrid, row);
  g.input('STATE_IN', 'FP32', [BATCH_DIM, width]);
  g.input('STEP_IN', 'INT32', row);
  g.initializer('one', 'FP32', [], Float32Array.of(1));
  g.op('Sub', ['one', 'START'], 'keep');
  g.op('Mul', ['STATE_IN', 'keep'], 'kept');
  g.op('Add', ['kept', 'INPUT'], 'STATE_OUT');
  g.op('Add', ['STATE_OUT', 'END'], 'OUTPUT');
  g.op('Cast', ['keep'], 'keep_int', { to: ONNX_INT32 });
  g.op('Cast', ['READY'], 'ready_int', { to: ONNX_INT32 });
  g.op('Mul', ['STEP_IN', 'keep_int'], 'steps_kept');
  g.op('Add', ['steps_kept', 'ready_int'], 'STEP_OUT');
  g.op('Identity', ['STEP_OUT'], 'OUT_STEP');
  g.op('Identity', ['CORRID'], 'OUT_CORRID');
  g.output('OUTPUT', 'FP32', [BATCH_DIM, width]);
  g.output('OUT_STEP', 'INT32', row);
  g.output('OUT_CORRID', corrid, row);
  g.output('STATE_OUT', 'FP32', [BATCH_DIM, width]);
  g.output('STEP_OUT', 'INT32', row);
  return g.build({ docString: 'a sum and a step count per sequence, in implicit state' });
}

/**
 * A recurrent cell whose state the server keeps (implicit state), heavy enough that batching
 * sequences pays: h = INPUT + STATE_IN, then `layers` x (MatMul + Add + Tanh); STATE_OUT = OUTPUT =
 * the last layer's output, all [batch, width]. About 4 * layers * width^2 bytes of weights.
 */
export function recurrentCell(width: number, layers = 2, seed = 1): ModelProto {
  const next = mulberry32(seed);
  const g = new GraphBuilder(`recurrent_${layers}x${width}`);
  const dims = [BATCH_DIM, width];
  g.input('INPUT', 'FP32', dims);
  g.input('STATE_IN', 'FP32', dims);
  let x = g.op('Add', ['INPUT', 'STATE_IN'], 'h');
  for (let l = 0; l < layers; l++) {
    const w = g.initializer(`w${l}`, 'FP32', [width, width], uniformFloat32(next, width * width, Math.sqrt(3 / width)));
    const b = g.initializer(`b${l}`, 'FP32', [width], uniformFloat32(next, width, 0.01));
    const mm = g.op('MatMul', [x, w], `mm${l}`);
    const add = g.op('Add', [mm, b], `add${l}`);
    x = g.op('Tanh', [add], l === layers - 1 ? 'STATE_OUT' : `tanh${l}`);
  }
  g.op('Identity', ['STATE_OUT'], 'OUTPUT');
  g.output('OUTPUT', 'FP32', dims);
  g.output('STATE_OUT', 'FP32', dims);
  return g.build({ docString: `recurrent cell ${layers}x${width}, seed ${seed}: the state is kept by the server` });
}
