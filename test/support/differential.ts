/**
 * The differential harness (issue 14): a model spec becomes an ONNX model and its
 * config.pbtxt; requests of random shapes and contents come from one fast-check generator;
 * ONNX Runtime run in-process on the same inputs gives the expected outputs; one comparison
 * checks the server's answer bit for bit. The transports are in differential-transports.ts,
 * the table of models and the test in ../differential.test.ts.
 */
import fc from 'fast-check';
import type { InferResult, TypedArray } from '@batchwise/client';
import { GraphBuilder, tritonConfigType, type ModelProto, type TensorDatatype } from '@batchwise/modelgen';
import { loadOrt, ORT_TYPES, type OrtSession } from '@batchwise/modelgen/test-support/ort.ts';

export interface TensorSpec {
  readonly name: string;
  readonly datatype: TensorDatatype;
  /** As config.pbtxt declares them, without the batch dimension; -1 is variable. */
  readonly dims: readonly number[];
  /** config.pbtxt `reshape`: the dims the ONNX model has. */
  readonly reshape?: readonly number[];
}

export interface ModelSpec {
  readonly name: string;
  /** 0: the model does not batch; above 0 it batches, with dynamic_batching. */
  readonly maxBatchSize: number;
  readonly inputs: readonly TensorSpec[];
  readonly outputs: readonly TensorSpec[];
  /** Adds the nodes that compute the outputs from the inputs (by the specs' names). */
  readonly graph: (g: GraphBuilder) => void;
}

/** Long enough for concurrent requests to meet in one batch on a busy 2-core machine. */
const MAX_QUEUE_DELAY_US = 20_000;

export function onnxModel(spec: ModelSpec): ModelProto {
  const g = new GraphBuilder(spec.name);
  const dims = (t: TensorSpec) => [...(spec.maxBatchSize > 0 ? ['batch'] : []), ...(t.reshape ?? t.dims)];
  for (const t of spec.inputs) g.input(t.name, t.datatype, dims(t));
  spec.graph(g);
  for (const t of spec.outputs) g.output(t.name, t.datatype, dims(t));
  return g.build();
}

/** A tensor's config entry; `reshape` only where asked (an ensemble's tensors have none). */
function tensorEntry(t: TensorSpec, withReshape = true, name = t.name): string {
  return (
    `{ name: "${name}" data_type: ${tritonConfigType(t.datatype)} dims: [ ${t.dims.join(', ')} ]` +
    `${withReshape && t.reshape ? ` reshape: { shape: [ ${t.reshape.join(', ')} ] }` : ''} }`
  );
}

/** Batching settings and one CPU instance, as every model of the harness has them. */
function schedulingLines(spec: ModelSpec): string[] {
  return [
    'instance_group [ { kind: KIND_CPU, count: 1 } ]',
    ...(spec.maxBatchSize > 0 ? [`dynamic_batching { max_queue_delay_microseconds: ${MAX_QUEUE_DELAY_US} }`] : []),
  ];
}

export function configText(spec: ModelSpec): string {
  return [
    `name: "${spec.name}"`,
    'platform: "onnxruntime_onnx"',
    `max_batch_size: ${spec.maxBatchSize}`,
    `input [ ${spec.inputs.map((t) => tensorEntry(t)).join(', ')} ]`,
    `output [ ${spec.outputs.map((t) => tensorEntry(t)).join(', ')} ]`,
    ...schedulingLines(spec),
  ].join('\n');
}

/** JavaScript model code that answers each request with its own inputs, each renamed `<name>__js`. */
export const PASS_THROUGH_JS = `export default {
  execute(requests) {
    return requests.map((request) => ({
      outputs: Object.values(request.inputs).map((tensor) => ({ ...tensor, name: tensor.name + '__js' })),
    }));
  },
};
`;

/**
 * The models that put `spec` behind a pipeline: `js_<name>`, a JavaScript model passing the
 * inputs through (backend js, batching as the model does), and `ens_<name>`, an ensemble of it
 * and the ONNX model. Its answers must equal the ONNX model's run in-process on the same inputs.
 */
export function pipelineAround(spec: ModelSpec): { name: string; config: string; files?: Record<string, string> }[] {
  const js = `js_${spec.name}`;
  const jsConfig = [
    `name: "${js}"`,
    'backend: "js"',
    `max_batch_size: ${spec.maxBatchSize}`,
    `input [ ${spec.inputs.map((t) => tensorEntry(t, false)).join(', ')} ]`,
    `output [ ${spec.inputs.map((t) => tensorEntry(t, false, `${t.name}__js`)).join(', ')} ]`,
    ...schedulingLines(spec),
  ].join('\n');
  const map = (kind: string, pairs: [string, string][]) => pairs.map(([k, v]) => `${kind} { key: "${k}" value: "${v}" }`).join(' ');
  const ensembleConfig = [
    `name: "ens_${spec.name}"`,
    'platform: "ensemble"',
    `max_batch_size: ${spec.maxBatchSize}`,
    `input [ ${spec.inputs.map((t) => tensorEntry(t, false)).join(', ')} ]`,
    `output [ ${spec.outputs.map((t) => tensorEntry(t, false)).join(', ')} ]`,
    'ensemble_scheduling { step [',
    `  { model_name: "${js}" model_version: -1 ${map(
      'input_map',
      spec.inputs.map((t) => [t.name, t.name]),
    )} ` +
      `${map(
        'output_map',
        spec.inputs.map((t) => [`${t.name}__js`, `${t.name}__mid`]),
      )} },`,
    `  { model_name: "${spec.name}" model_version: -1 ${map(
      'input_map',
      spec.inputs.map((t) => [t.name, `${t.name}__mid`]),
    )} ` +
      `${map(
        'output_map',
        spec.outputs.map((t) => [t.name, t.name]),
      )} }`,
    '] }',
  ].join('\n');
  return [
    { name: js, config: jsConfig, files: { '1/model.mjs': PASS_THROUGH_JS } },
    { name: `ens_${spec.name}`, config: ensembleConfig },
  ];
}

/** Elements, row-major: the datatype's typed array (BOOL: Uint8Array, FP16: Uint16Array bits); BYTES: one array per element. */
export type Elements = TypedArray | Uint8Array[];

export interface TensorValue {
  readonly name: string;
  /** BF16 only to see it refused (onnxruntime-node cannot run it). */
  readonly datatype: TensorDatatype | 'BF16';
  readonly shape: readonly number[];
  readonly data: Elements;
}

/** A client's answer as the values differences() compares. */
export function resultValues(result: InferResult): TensorValue[] {
  return result.outputs.map((o) => ({
    name: o.name,
    datatype: o.datatype as TensorValue['datatype'],
    shape: o.shape,
    data: o.data as TensorValue['data'],
  }));
}

export interface DiffRequest {
  readonly model: string;
  readonly inputs: readonly TensorValue[];
  /** Absent: all outputs. */
  readonly outputs?: readonly string[];
}

/** What a wire format can carry, so that the generator sends nothing a client cannot say. */
export interface Wire {
  /** FP16 has no JSON form and no typed-contents field. */
  readonly fp16: boolean;
  /**
   * 'bits': every bit pattern; 'numbers': NaN without payload (the typed-contents client builds
   * its message from arrays of JS numbers, which do not keep NaN payloads; the server copies
   * packed floats whole); 'finite': JSON numbers, so no NaN or infinity (outputs are then
   * compared as numbers: NaN payloads do not survive JSON text).
   */
  readonly floats: 'bits' | 'numbers' | 'finite';
  /** 'text': BYTES elements are UTF-8 (JSON strings); 'any': any bytes. */
  readonly bytes: 'any' | 'text';
}

export function carries(wire: Wire, spec: ModelSpec): boolean {
  return wire.fp16 || spec.inputs.every((t) => t.datatype !== 'FP16');
}

/** Values for the model's variable dims, by position (inputs with -1 at one position share its size). */
export function variableDims(spec: ModelSpec): fc.Arbitrary<number[]> {
  const rank = Math.max(...spec.inputs.map((t) => t.dims.length));
  const size = fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 6, arbitrary: fc.integer({ min: 1, max: 4 }) });
  return fc.array(size, { minLength: rank, maxLength: rank });
}

/** One valid request (a batch size of its own, random contents, a random choice of outputs) for the given variable dims. */
export function requestArbitrary(spec: ModelSpec, wire: Wire, dims: readonly number[]): fc.Arbitrary<DiffRequest> {
  const batch = spec.maxBatchSize > 0 ? fc.integer({ min: 1, max: Math.min(spec.maxBatchSize, 4) }) : fc.constant(undefined);
  const outputs = fc.option(
    fc.shuffledSubarray(
      spec.outputs.map((o) => o.name),
      { minLength: 1 },
    ),
    { nil: undefined },
  );
  return fc.tuple(batch, outputs).chain(([b, o]) => {
    const shapeOf = (t: TensorSpec) => [...(b === undefined ? [] : [b]), ...t.dims.map((d, i) => (d === -1 ? dims[i]! : d))];
    const inputs = spec.inputs.map((t) => {
      const shape = shapeOf(t);
      return elementsArbitrary(
        t.datatype,
        shape.reduce((x, y) => x * y, 1),
        wire,
      ).map((data): TensorValue => ({ name: t.name, datatype: t.datatype, shape, data }));
    });
    return fc.tuple(...inputs).map((values): DiffRequest => ({ model: spec.name, inputs: values, ...(o && { outputs: o }) }));
  });
}

const utf8 = new TextEncoder();
const text = fc
  .string({ unit: 'binary', maxLength: 6 })
  .filter((s) => !s.includes('\0'))
  .map((s) => utf8.encode(s));

function elementsArbitrary(datatype: TensorDatatype, count: number, wire: Wire): fc.Arbitrary<Elements> {
  const length = { minLength: count, maxLength: count };
  switch (datatype) {
    case 'BOOL':
      return fc.uint8Array({ ...length, min: 0, max: 1 });
    case 'UINT8':
      return fc.uint8Array(length);
    case 'UINT16':
    case 'FP16':
      return fc.uint16Array(length);
    case 'UINT32':
      return fc.uint32Array(length);
    case 'UINT64':
      return fc.bigUint64Array(length);
    case 'INT8':
      return fc.int8Array(length);
    case 'INT16':
      return fc.int16Array(length);
    case 'INT32':
      return fc.int32Array(length);
    case 'INT64':
      return fc.bigInt64Array(length);
    case 'FP32':
      return floats(
        fc.float32Array,
        fc.uint32Array(length).map((u) => new Float32Array(u.buffer, u.byteOffset, u.length)),
        length,
        wire,
      );
    case 'FP64':
      return floats(
        fc.float64Array,
        fc.bigUint64Array(length).map((u) => new Float64Array(u.buffer, u.byteOffset, u.length)),
        length,
        wire,
      );
    case 'BYTES': {
      // Mostly text; now and then an element ONNX Runtime strings cannot hold (NUL, not UTF-8): a 4xx naming the input.
      const withNul = fc.tuple(text, text).map(([a, b]) => Uint8Array.from([...a, 0, ...b]));
      const unfit = wire.bytes === 'any' ? fc.oneof(withNul, fc.uint8Array({ maxLength: 4 })) : withNul;
      return fc.array(fc.oneof({ weight: 30, arbitrary: text }, { weight: 1, arbitrary: unfit }), length);
    }
  }
}

/** Interesting values (±0, subnormals, extremes) and random bit patterns (NaN payloads), as far as the wire carries them. */
function floats<T extends Float32Array | Float64Array>(
  values: (c: { minLength: number; maxLength: number; noNaN?: boolean; noDefaultInfinity?: boolean }) => fc.Arbitrary<T>,
  bits: fc.Arbitrary<T>,
  length: { minLength: number; maxLength: number },
  wire: Wire,
): fc.Arbitrary<T> {
  if (wire.floats === 'finite') return values({ ...length, noNaN: true, noDefaultInfinity: true });
  const any = fc.oneof(values(length), bits);
  if (wire.floats === 'bits') return any;
  return any.map((a) => a.map((x) => (Number.isNaN(x) ? NaN : x)) as T);
}

/** The refusal a request must get, when it has one: a BYTES element ONNX Runtime cannot take names its input. */
export function expectedRefusal(request: DiffRequest): RegExp | undefined {
  const strict = new TextDecoder('utf-8', { fatal: true });
  const unfit = (e: Uint8Array) => {
    if (e.includes(0)) return true;
    try {
      strict.decode(e);
      return false;
    } catch {
      return true;
    }
  };
  const bad = request.inputs.find((t) => t.datatype === 'BYTES' && (t.data as Uint8Array[]).some(unfit));
  return bad && new RegExp(`'${bad.name}'`);
}

/**
 * Triton's reshape rule: `to`, its -1s filled in order from the sizes `shape` has where `from`
 * has -1. Written here again on purpose: the reference does not borrow the server's code.
 */
function mapShape(shape: readonly number[], from: readonly number[], to: readonly number[], batching: boolean): number[] {
  const rest = batching ? shape.slice(1) : shape;
  const sizes = from.flatMap((d, i) => (d === -1 ? [rest[i]!] : []));
  return [...(batching ? [shape[0]!] : []), ...to.map((d) => (d === -1 ? sizes.shift()! : d))];
}

/** The same model in-process: what the server must answer. */
export class Reference {
  private constructor(
    private readonly spec: ModelSpec,
    private readonly session: OrtSession,
  ) {}

  static async create(spec: ModelSpec, model: Uint8Array): Promise<Reference> {
    return new Reference(spec, await loadOrt().InferenceSession.create(model, { logSeverityLevel: 3 }));
  }

  async run(request: DiffRequest): Promise<TensorValue[]> {
    const ort = loadOrt();
    const batching = this.spec.maxBatchSize > 0;
    const decoder = new TextDecoder();
    const feeds = Object.fromEntries(
      request.inputs.map((t) => {
        const spec = this.spec.inputs.find((s) => s.name === t.name)!;
        const shape = spec.reshape ? mapShape(t.shape, spec.dims, spec.reshape, batching) : t.shape;
        const data = t.datatype === 'BYTES' ? (t.data as Uint8Array[]).map((e) => decoder.decode(e)) : t.data;
        return [t.name, new ort.Tensor(ORT_TYPES[t.datatype]!, data, shape)];
      }),
    );
    const results = await this.session.run(feeds);
    return (request.outputs ?? this.spec.outputs.map((o) => o.name)).map((name) => {
      const spec = this.spec.outputs.find((s) => s.name === name)!;
      const tensor = results[name]!;
      const shape = spec.reshape ? mapShape(tensor.dims, spec.reshape, spec.dims, batching) : [...tensor.dims];
      const data =
        spec.datatype === 'BYTES' ? Array.from(tensor.data as ArrayLike<string>, (s) => utf8.encode(s)) : (tensor.data as TypedArray);
      return { name, datatype: spec.datatype, shape, data };
    });
  }

  release(): Promise<void> {
    return this.session.release();
  }
}

/** What a transport got back: the outputs, or an error with whether it is the client's fault (4xx, INVALID_ARGUMENT, ...). */
export type Outcome =
  | { readonly outputs: readonly TensorValue[] }
  | { readonly error: { readonly status: string; readonly clientError: boolean; readonly message: string } };

/**
 * Every difference between the answer and the reference, empty when they agree: the same
 * outputs by name, shapes and datatypes, and elements bit for bit (over JSON, floats as
 * numbers: NaN equals NaN, -0 differs from 0).
 */
export function differences(expected: readonly TensorValue[], actual: readonly TensorValue[], wire: Wire): string[] {
  const found: string[] = [];
  const names = (ts: readonly TensorValue[]) =>
    ts
      .map((t) => t.name)
      .sort()
      .join(',');
  if (names(expected) !== names(actual)) found.push(`outputs [${names(actual)}], expected [${names(expected)}]`);
  for (const want of expected) {
    const got = actual.find((t) => t.name === want.name);
    if (!got) continue;
    const what = `output '${want.name}'`;
    if (got.datatype !== want.datatype) found.push(`${what} is ${got.datatype}, expected ${want.datatype}`);
    if (got.shape.join() !== want.shape.join()) found.push(`${what} has shape [${got.shape}], expected [${want.shape}]`);
    const asNumbers = wire.floats === 'finite' && (want.datatype === 'FP32' || want.datatype === 'FP64');
    const a = elementTexts(want, asNumbers);
    const b = elementTexts(got, asNumbers);
    const at = a.findIndex((x, i) => x !== b[i]);
    if (a.length !== b.length) found.push(`${what} has ${b.length} elements, expected ${a.length}`);
    else if (at >= 0) found.push(`${what} element ${at} is ${b[at]}, expected ${a[at]}`);
  }
  return found;
}

/** Each element as text that is equal exactly when the elements are: its bytes in hex, or the number (NaN, -0 kept). */
function elementTexts(t: TensorValue, asNumbers: boolean): string[] {
  if (t.datatype === 'BYTES') return (t.data as Uint8Array[]).map((e) => Buffer.from(e).toString('hex'));
  const data = t.data as TypedArray;
  if (asNumbers) return Array.from(data as Float32Array, (x) => (Object.is(x, -0) ? '-0' : String(x)));
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const size = data.BYTES_PER_ELEMENT;
  return Array.from({ length: data.length }, (_, i) => bytes.subarray(i * size, (i + 1) * size).toString('hex'));
}
