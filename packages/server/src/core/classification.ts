import { serializeBytesElements } from '../tensor/bytes-codec.ts';
import { elementCount } from '../tensor/shape.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { typedArrayOf } from '../tensor/typed-view.ts';
import { Errors } from '../errors/errors.ts';

/**
 * Triton's classification extension: an output asked for with `classification: k` comes back
 * as a BYTES tensor of the k highest scores per batch item, each "value:index" or
 * "value:index:label" (labels from the output's label_filename), best first. Floats are
 * written with six decimals, as Triton's std::to_string writes them.
 */
export function classify(tensor: Tensor, count: number, labels: readonly string[] | undefined, batched: boolean): Tensor {
  if (tensor.datatype === 'BYTES' || tensor.datatype === 'BOOL') {
    throw Errors.invalidArg(`classification of output '${tensor.name}' needs numeric scores, but it is ${tensor.datatype}`);
  }
  const values = scoresOf(tensor);
  const rows = batched ? (tensor.shape[0] ?? 1) : 1;
  const perRow = rows === 0 ? 0 : elementCount(tensor.shape) / rows;
  const k = Math.min(count, perRow);
  const integer = !tensor.datatype.startsWith('FP') && tensor.datatype !== 'BF16';
  const elements: string[] = [];
  for (let row = 0; row < rows; row++) {
    const start = row * perRow;
    const order = Array.from({ length: perRow }, (_, i) => i);
    // Stable: equal scores keep the lower index first.
    order.sort((a, b) => rank(values.number(start + b)) - rank(values.number(start + a)));
    for (const index of order.slice(0, k)) {
      const value = integer ? values.exact(start + index) : values.number(start + index).toFixed(6);
      const label = labels?.[index];
      elements.push(label === undefined || label === '' ? `${value}:${index}` : `${value}:${index}:${label}`);
    }
  }
  return {
    name: tensor.name,
    datatype: 'BYTES',
    shape: batched ? [rows, k] : [k],
    data: serializeBytesElements(elements),
  };
}

/** A positive integer `classification` parameter, or a 400 that names the output. */
export function classificationCount(value: unknown, output: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw Errors.invalidArg(
      `classification of output '${output}' must be a positive integer (the number of classes to return), got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** NaN scores rank last instead of breaking the sort. */
function rank(score: number): number {
  return Number.isNaN(score) ? -Infinity : score;
}

interface Scores {
  number(i: number): number;
  exact(i: number): string;
}

function scoresOf(tensor: Tensor): Scores {
  const array = typedArrayOf(tensor);
  if (tensor.datatype === 'FP16' || tensor.datatype === 'BF16') {
    const decode = tensor.datatype === 'FP16' ? halfToNumber : bfloat16ToNumber;
    return { number: (i) => decode(array[i] as number), exact: (i) => String(decode(array[i] as number)) };
  }
  return { number: (i) => Number(array[i]), exact: (i) => String(array[i]) };
}

function halfToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 0x1f) return fraction === 0 ? sign * Infinity : NaN;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

const bf16Scratch = new Float32Array(1);
const bf16Bits = new Uint32Array(bf16Scratch.buffer);
function bfloat16ToNumber(bits: number): number {
  bf16Bits[0] = bits << 16;
  return bf16Scratch[0]!;
}
