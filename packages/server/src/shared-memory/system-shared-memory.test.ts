import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SystemSharedMemory } from './system-shared-memory.ts';

describe('SystemSharedMemory', () => {
  let dir: string;
  let shm: SystemSharedMemory;

  beforeEach(async () => {
    // A folder stands in for /dev/shm here: on Linux a POSIX shared memory object is a file there.
    dir = await mkdtemp(join(tmpdir(), 'shm-'));
    shm = new SystemSharedMemory(dir);
    await writeFile(join(dir, 'obj'), Buffer.from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]));
  });
  afterEach(async () => {
    await shm.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('registers a slice of an object by key, with or without the leading slash, and reports it', async () => {
    await shm.register('a', '/obj', 4, 8);
    await shm.register('b', 'obj', 0, 16);
    expect(shm.status()).toEqual([
      { name: 'a', key: '/obj', offset: 4, byte_size: 8 },
      { name: 'b', key: 'obj', offset: 0, byte_size: 16 },
    ]);
    expect(shm.status('a')).toEqual([{ name: 'a', key: '/obj', offset: 4, byte_size: 8 }]);
  });

  it('reads and writes at the region offset plus the request offset', async () => {
    await shm.register('a', '/obj', 4, 8);
    const lease = shm.lease({ region: 'a', offset: 2, byteSize: 4 }, "input 'X'");
    expect([...(await lease.read())]).toEqual([6, 7, 8, 9]);
    await lease.write(Buffer.from([90, 91]));
    lease.release();
    expect([...(await readFile(join(dir, 'obj')))].slice(4, 12)).toEqual([4, 5, 90, 91, 8, 9, 10, 11]);
  });

  it('refuses what Triton refuses, with messages that name the problem', async () => {
    await expect(shm.register('a', '/missing', 0, 4)).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: expect.stringMatching(/Unable to open shared memory region: '\/missing'.*no such shared memory object/),
    });
    await expect(shm.register('a', '/obj', 8, 9)).rejects.toThrow(/offset 8 \+ byte_size 9 runs past the end of '\/obj' \(16 bytes\)/);
    await expect(shm.register('', '/obj', 0, 4)).rejects.toThrow(/non-empty name/);
    await expect(shm.register('a', '/obj', -1, 4)).rejects.toThrow(/offset must be a non-negative integer/);
    await shm.register('a', '/obj', 0, 16);
    await expect(shm.register('a', '/obj', 0, 4)).rejects.toMatchObject({
      code: 'ALREADY_EXISTS',
      message: "shared memory region 'a' already in manager",
    });
    expect(() => shm.status('nope')).toThrow(
      expect.objectContaining({ code: 'NOT_FOUND', message: "Unable to find system shared memory region: 'nope'" }),
    );
    // No CUDA region is ever registered: none listed, a name not found (a system region's name said to be one), as Triton says.
    expect(shm.cudaStatus()).toEqual([]);
    expect(() => shm.cudaStatus('nope')).toThrow(
      expect.objectContaining({ code: 'NOT_FOUND', message: "Unable to find cuda shared memory region: 'nope'" }),
    );
    expect(() => shm.cudaStatus('a')).toThrow(
      expect.objectContaining({
        code: 'NOT_FOUND',
        message: "The region named 'a' is registered as system shared memory, not CUDA shared memory",
      }),
    );
    expect(() => shm.lease({ region: 'nope', offset: 0, byteSize: 4 }, "input 'X'")).toThrow(
      expect.objectContaining({ code: 'NOT_FOUND', message: "input 'X': Unable to find shared memory region: 'nope'" }),
    );
    expect(() => shm.lease({ region: 'a', offset: 12, byteSize: 8 }, "output 'Y'")).toThrow(
      /output 'Y': Invalid offset \+ byte size for shared memory region: 'a' \(shared_memory_offset 12 \+ shared_memory_byte_size 8 runs past its 16 bytes\)/,
    );
    const lease = shm.lease({ region: 'a', offset: 0, byteSize: 2 }, "output 'Y'");
    await expect(lease.write(Buffer.alloc(4))).rejects.toThrow(/for output 'Y' \(2 bytes\) should be at least 4 bytes to hold the results/);
    lease.release();
  });

  it('keeps keys inside the shm folder', async () => {
    for (const key of ['/../obj', 'a/b', '..', '/', '']) {
      await expect(shm.register('x', key, 0, 1)).rejects.toThrow(/invalid key/);
    }
  });

  it('an unregister during a request lets that request finish; unknown names are not an error', async () => {
    await shm.register('a', '/obj', 0, 16);
    const lease = shm.lease({ region: 'a', offset: 0, byteSize: 2 }, "input 'X'");
    await shm.unregister('a');
    await shm.unregister('never-registered');
    expect(shm.status()).toEqual([]);
    expect([...(await lease.read())]).toEqual([0, 1]);
    lease.release();
    expect(() => shm.lease({ region: 'a', offset: 0, byteSize: 2 }, "input 'X'")).toThrow(/Unable to find/);
    await shm.register('a', '/obj', 0, 16);
  });

  it('unregisters every region when no name is given', async () => {
    await shm.register('a', '/obj', 0, 8);
    await shm.register('b', '/obj', 8, 8);
    await shm.unregister();
    expect(shm.status()).toEqual([]);
  });
});
