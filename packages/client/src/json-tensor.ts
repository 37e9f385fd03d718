import { BatchwiseClientError } from './errors.ts';
import { ARRAY_OF } from './tensor-data.ts';
import type { DataType, InputData, OutputData } from './types.ts';

const utf8Strict = new TextDecoder('utf-8', { fatal: true });
const utf8 = new TextEncoder();

/**
 * Input elements as the text of a flat JSON array. Written by hand rather than through
 * JSON.stringify so that INT64/UINT64 beyond 2^53 keep every digit.
 */
export function inputToJsonText(input: string, datatype: DataType, data: InputData): string {
  const values = Array.from(data as ArrayLike<unknown>);
  switch (datatype) {
    case 'FP16':
    case 'BF16':
      throw new BatchwiseClientError(`input '${input}': ${datatype} cannot travel as JSON; use binary: true`);
    case 'BYTES':
      return `[${values.map((v) => JSON.stringify(typeof v === 'string' ? v : utf8Text(input, v))).join(',')}]`;
    case 'BOOL':
      return `[${values.map((v) => (v ? 'true' : 'false')).join(',')}]`;
    default:
      return `[${values.map((v) => numberText(input, v)).join(',')}]`;
  }
}

function utf8Text(input: string, v: unknown): string {
  if (!(v instanceof Uint8Array)) throw new BatchwiseClientError(`input '${input}': BYTES data must be strings or Uint8Arrays`);
  try {
    return utf8Strict.decode(v);
  } catch {
    throw new BatchwiseClientError(`input '${input}': BYTES element is not UTF-8 text, which JSON cannot carry; use binary: true`);
  }
}

function numberText(input: string, v: unknown): string {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number' && Number.isFinite(v)) return Object.is(v, -0) ? '-0.0' : String(v); // String(-0) is '0'
  if (typeof v === 'boolean') return v ? '1' : '0';
  throw new BatchwiseClientError(`input '${input}': ${String(v)} cannot travel as JSON; use binary: true`);
}

/** A JSON `data` array -> the same output elements a binary response gives. */
export function outputFromJson(output: string, datatype: DataType, data: unknown): OutputData {
  if (!Array.isArray(data)) throw new BatchwiseClientError(`output '${output}' has no data array`);
  const values = data.flat(Infinity) as unknown[];
  if (datatype === 'BYTES') return values.map((v) => utf8.encode(String(v)));
  const Ctor = ARRAY_OF[datatype];
  if (Ctor === BigInt64Array || Ctor === BigUint64Array) {
    return (Ctor as unknown as typeof BigInt64Array).from(values, (v) => BigInt(v as number | bigint | string));
  }
  const out = new Ctor(values.length) as Exclude<OutputData, BigInt64Array | BigUint64Array | Uint8Array[]>;
  for (let i = 0; i < values.length; i++) out[i] = Number(values[i]);
  return out;
}
