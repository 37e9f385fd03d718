import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Tensor } from '../tensor/tensor.ts';

/** Bytes an entry costs besides its tensors (key, arrays, objects): keeps many tiny entries honest. */
const ENTRY_OVERHEAD_BYTES = 256;

/** What a cached response depends on besides its inputs: the outputs asked for, and how. */
export interface RequestedOutputKey {
  readonly name: string;
  readonly classification?: number;
}

/**
 * Triton's response cache (`--cache-config local,size=<bytes>`, and `response_cache { enable:
 * true }` per model): identical requests to a deterministic model are answered from memory.
 * Least recently used entries go first once the size is reached.
 */
export class ResponseCache {
  private readonly entries: LRUCache<string, readonly Tensor[]>;
  private evictions = 0;

  constructor(readonly sizeBytes: number) {
    this.entries = new LRUCache<string, readonly Tensor[]>({
      maxSize: sizeBytes,
      sizeCalculation: (outputs) => ENTRY_OVERHEAD_BYTES + outputs.reduce((sum, t) => sum + t.data.byteLength, 0),
      dispose: (_value, _key, reason) => {
        if (reason === 'evict') this.evictions++;
      },
    });
  }

  /** A digest of everything the response depends on: model, version, every input (name, type, shape, bytes) and the outputs asked for. */
  keyOf(model: string, version: string, inputs: readonly Tensor[], outputs: readonly RequestedOutputKey[]): string {
    const hash = createHash('sha256');
    hash.update(`${model}\0${version}\0`);
    for (const input of inputs) {
      hash.update(`${input.name}\0${input.datatype}\0${input.shape.join(',')}\0${input.data.byteLength}\0`);
      hash.update(input.data);
    }
    for (const output of outputs) hash.update(`${output.name}\0${output.classification ?? ''}\0`);
    return hash.digest('base64');
  }

  get(key: string): readonly Tensor[] | undefined {
    return this.entries.get(key);
  }

  /** Stores copies: outputs are views on whole batch buffers, which a cache entry must not keep alive. */
  set(key: string, outputs: readonly Tensor[]): void {
    this.entries.set(
      key,
      outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: [...t.shape], data: t.data.slice() })),
    );
  }

  get entryCount(): number {
    return this.entries.size;
  }

  /** Fraction of the size in use, 0..1. */
  get utilization(): number {
    return this.entries.calculatedSize / this.sizeBytes;
  }

  get evictionCount(): number {
    return this.evictions;
  }
}

/** Triton's `--cache-config local,size=<bytes>` (repeatable, one key each); undefined when not given. */
export function parseCacheConfigFlags(flags: readonly string[]): { sizeBytes: number } | undefined {
  if (flags.length === 0) return undefined;
  let sizeBytes: number | undefined;
  for (const flag of flags) {
    const match = /^([a-z_]+),([a-z_]+)=(.*)$/.exec(flag);
    if (!match || match[1] !== 'local') {
      throw new Error(`--cache-config must be local,<key>=<value> (the local cache is the only one), got '${flag}'`);
    }
    if (match[2] !== 'size') throw new Error(`--cache-config local supports only size=<bytes>, got '${flag}'`);
    const size = Number(match[3]);
    if (!Number.isSafeInteger(size) || size <= 0)
      throw new Error(`--cache-config local,size= needs a positive number of bytes, got '${match[3]}'`);
    sizeBytes = size;
  }
  return sizeBytes === undefined ? undefined : { sizeBytes };
}
