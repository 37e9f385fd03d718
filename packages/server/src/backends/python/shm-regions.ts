import { closeSync, existsSync, ftruncateSync, openSync, readSync, unlinkSync, writevSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tensor } from '../../tensor/tensor.ts';
import type { Slice } from './protocol.ts';

/** Triton's `shm-default-byte-size` and `shm-growth-byte-size` of the python backend (1 MiB each). */
export const DEFAULT_SHM_BYTES = 1 << 20;
export const DEFAULT_SHM_GROWTH_BYTES = 1 << 20;

const ALIGN = 8;
const PADDING = Buffer.alloc(ALIGN);
let nextRegion = 0;

/** Where shared-memory files live: /dev/shm (tmpfs) where there is one. */
function shmDir(): string {
  return existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
}

function align(n: number): number {
  return Math.ceil(n / ALIGN) * ALIGN;
}

/**
 * One stub's two shared-memory files: the input region, which the server writes and the stub maps
 * (its inputs are views there), and the output region, which the stub writes (and grows) and the
 * server reads once. Both are unlinked as soon as the stub has opened them, so nothing is left in
 * /dev/shm whichever process dies.
 */
export class ShmRegions {
  readonly inPath: string;
  readonly outPath: string;
  private readonly inFd: number;
  private readonly outFd: number;
  private inBytes: number;
  private closed = false;

  constructor(
    defaultBytes: number,
    private readonly growthBytes: number,
  ) {
    const base = join(shmDir(), `batchwise-python-${process.pid}-${nextRegion++}`);
    this.inPath = `${base}-in`;
    this.outPath = `${base}-out`;
    this.inFd = openSync(this.inPath, 'w+', 0o600);
    this.outFd = openSync(this.outPath, 'w+', 0o600);
    ftruncateSync(this.inFd, defaultBytes);
    ftruncateSync(this.outFd, defaultBytes);
    this.inBytes = defaultBytes;
  }

  /** The input region's size now (the stub maps it again when it grew). */
  get inSize(): number {
    return this.inBytes;
  }

  /**
   * Writes each request's inputs into the input region, one after another, each 8-byte aligned,
   * in one system call; grows the region by whole growth steps first when they do not fit.
   */
  writeInputs(requests: readonly (readonly Tensor[])[]): Slice[][] {
    const buffers: Uint8Array[] = [];
    let offset = 0;
    const slices = requests.map((inputs) =>
      inputs.map((t) => {
        const start = align(offset);
        if (start > offset) buffers.push(PADDING.subarray(0, start - offset));
        buffers.push(t.data);
        offset = start + t.data.byteLength;
        return { name: t.name, datatype: t.datatype, shape: t.shape, offset: start, byteLength: t.data.byteLength };
      }),
    );
    if (offset > this.inBytes) {
      this.inBytes += Math.ceil((offset - this.inBytes) / this.growthBytes) * this.growthBytes;
      ftruncateSync(this.inFd, this.inBytes);
    }
    if (offset > 0) writevSync(this.inFd, buffers, 0);
    return slices;
  }

  /** The output region's first `bytes` bytes, copied once into a buffer of the server's. */
  readOutputs(bytes: number): Buffer {
    const buffer = Buffer.allocUnsafe(bytes);
    let read = 0;
    while (read < bytes) {
      const n = readSync(this.outFd, buffer, read, bytes - read, read);
      if (n === 0) throw new Error(`the output region ended at ${read} of the ${bytes} bytes the model wrote`);
      read += n;
    }
    return buffer;
  }

  /** The files' names go (the processes keep what they opened). */
  unlink(): void {
    for (const path of [this.inPath, this.outPath]) {
      try {
        unlinkSync(path);
      } catch {
        // already gone
      }
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unlink();
    closeSync(this.inFd);
    closeSync(this.outFd);
  }
}
