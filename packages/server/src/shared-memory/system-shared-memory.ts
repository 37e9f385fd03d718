import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Errors, InferenceServerError } from '../errors/errors.ts';
import type { SharedMemoryRef, SharedMemoryRegionStatus } from '../protocol/types.ts';

export type { SharedMemoryRef, SharedMemoryRegionStatus } from '../protocol/types.ts';

/** Where POSIX shm_open(3) keeps its objects on Linux: shm_open("/name") is this folder's file "name". */
export const DEFAULT_SHM_DIR = '/dev/shm';

/** A region held open for one request: it stays usable until released, even if unregistered meanwhile. */
export interface RegionLease {
  read(): Promise<Buffer>;
  write(data: Uint8Array): Promise<void>;
  release(): void;
}

interface Region extends SharedMemoryRegionStatus {
  readonly file: FileHandle;
  users: number;
  unregistered: boolean;
}

/**
 * Triton's system shared memory extension. A client creates a POSIX shared memory object
 * (shm_open + ftruncate + mmap) and registers part of it by key; requests then name the
 * region instead of carrying tensor bytes. The server opens the same object as a file and
 * reads inputs from it and writes outputs into it: the client's mapping sees the same pages.
 */
export class SystemSharedMemory {
  private readonly regions = new Map<string, Region>();

  constructor(private readonly dir: string = DEFAULT_SHM_DIR) {}

  async register(name: string, key: string, offset: number, byteSize: number): Promise<void> {
    if (name === '') throw Errors.invalidArg('a shared memory region needs a non-empty name');
    checkSize(offset, 'offset');
    checkSize(byteSize, 'byte_size');
    if (this.regions.has(name)) throw alreadyRegistered(name);
    const file = await this.openKey(name, key);
    try {
      const { size } = await file.stat();
      if (offset + byteSize > size) {
        throw Errors.invalidArg(
          `failed to register shared memory region '${name}': offset ${offset} + byte_size ${byteSize} runs past the end of '${key}' (${size} bytes)`,
        );
      }
      // Another registration of the same name may have finished while this one opened its file.
      if (this.regions.has(name)) throw alreadyRegistered(name);
    } catch (error) {
      await file.close();
      throw error;
    }
    this.regions.set(name, { name, key, offset, byte_size: byteSize, file, users: 0, unregistered: false });
  }

  /** Unregisters one region, or every region when no name is given. An unknown name is not an error (as in Triton). */
  async unregister(name?: string): Promise<void> {
    const names = name === undefined || name === '' ? [...this.regions.keys()] : [name];
    await Promise.all(
      names.map((n) => {
        const region = this.regions.get(n);
        if (!region) return undefined;
        this.regions.delete(n);
        region.unregistered = true;
        return region.users === 0 ? region.file.close() : undefined;
      }),
    );
  }

  status(name?: string): SharedMemoryRegionStatus[] {
    if (name === undefined || name === '') return [...this.regions.values()].map(statusOf);
    const region = this.regions.get(name);
    if (!region) throw new InferenceServerError('NOT_FOUND', `Unable to find system shared memory region: '${name}'`);
    return [statusOf(region)];
  }

  /**
   * The CUDA regions registered, in Triton's CUDA shared memory extension: none ever is (no CUDA IPC
   * handle is mapped here), so every region's status is an empty list and a named one is not found, in
   * Triton's words (a name of this registry's is registered as system shared memory, as Triton says).
   * Unregistering CUDA regions has nothing to do and succeeds, as in Triton while none is registered: Triton's
   * shared memory examples unregister every CUDA region before they start.
   */
  cudaStatus(name?: string): never[] {
    if (name === undefined || name === '') return [];
    if (this.regions.has(name)) {
      throw new InferenceServerError(
        'NOT_FOUND',
        `The region named '${name}' is registered as system shared memory, not CUDA shared memory`,
      );
    }
    throw new InferenceServerError('NOT_FOUND', `Unable to find cuda shared memory region: '${name}'`);
  }

  /** Holds the region of `ref` for one request, after checking that the slice lies within it. `what` names the tensor. */
  lease(ref: SharedMemoryRef, what: string): RegionLease {
    const region = this.regions.get(ref.region);
    if (!region) throw new InferenceServerError('NOT_FOUND', `${what}: Unable to find shared memory region: '${ref.region}'`);
    if (ref.offset + ref.byteSize > region.byte_size) {
      throw Errors.invalidArg(
        `${what}: Invalid offset + byte size for shared memory region: '${ref.region}' (shared_memory_offset ${ref.offset} + shared_memory_byte_size ${ref.byteSize} runs past its ${region.byte_size} bytes)`,
      );
    }
    region.users++;
    const position = region.offset + ref.offset;
    let released = false;
    return {
      read: async () => {
        const data = Buffer.allocUnsafe(ref.byteSize);
        for (let done = 0; done < data.length;) {
          const { bytesRead } = await region.file.read(data, done, data.length - done, position + done);
          if (bytesRead === 0) throw Errors.invalidArg(`${what}: region '${ref.region}' ended early: its shared memory object was shrunk`);
          done += bytesRead;
        }
        return data;
      },
      write: async (data) => {
        if (data.byteLength > ref.byteSize) {
          throw Errors.invalidArg(
            `shared memory size specified with the request for ${what} (${ref.byteSize} bytes) should be at least ${data.byteLength} bytes to hold the results`,
          );
        }
        for (let done = 0; done < data.byteLength;) {
          const { bytesWritten } = await region.file.write(data, done, data.byteLength - done, position + done);
          done += bytesWritten;
        }
      },
      release: () => {
        if (released) return;
        released = true;
        region.users--;
        if (region.unregistered && region.users === 0) void region.file.close();
      },
    };
  }

  /** Closes every region (server shutdown). */
  close(): Promise<void> {
    return this.unregister();
  }

  private async openKey(name: string, key: string): Promise<FileHandle> {
    // shm_open ignores leading slashes and refuses names with others in them; so do we, which
    // also keeps a key from reaching outside the shm folder.
    const file = key.replace(/^\/+/, '');
    if (file === '' || file === '.' || file === '..' || file.includes('/') || file.includes('\0')) {
      throw Errors.invalidArg(
        `failed to register shared memory region '${name}': invalid key '${key}' (a POSIX shared memory name such as '/my_region')`,
      );
    }
    try {
      return await open(join(this.dir, file), 'r+');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw Errors.invalidArg(
        `Unable to open shared memory region: '${key}' for region '${name}'${code === 'ENOENT' ? ': no such shared memory object (create it with shm_open first)' : `: ${(error as Error).message}`}`,
      );
    }
  }
}

function statusOf(r: Region): SharedMemoryRegionStatus {
  return { name: r.name, key: r.key, offset: r.offset, byte_size: r.byte_size };
}

function alreadyRegistered(name: string): InferenceServerError {
  return new InferenceServerError('ALREADY_EXISTS', `shared memory region '${name}' already in manager`);
}

function checkSize(value: number, field: string): void {
  if (!Number.isSafeInteger(value) || value < 0)
    throw Errors.invalidArg(`shared memory ${field} must be a non-negative integer, got ${value}`);
}
