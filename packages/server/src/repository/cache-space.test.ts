import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CacheSpace } from './cache-space.ts';
import { ModelCache, type FetchObject } from './s3-cache.ts';
import type { ModelListing, RepositoryObject } from './snapshot.ts';

const logger = pino({ level: 'silent' });

/** A listing of one model with one version holding one file of `bytes` bytes. */
function listing(name: string, bytes: number, version = 1): ModelListing {
  const file: RepositoryObject = {
    path: `${version}/model.onnx`,
    key: `repo/${name}/${version}/model.onnx`,
    size: bytes,
    etag: `e${bytes}`,
  };
  return {
    name,
    config: undefined,
    configFingerprint: '',
    versions: [{ version, files: [file], fingerprint: file.etag, totalBytes: bytes }],
    otherFiles: [],
    fingerprint: file.etag,
  };
}

/** Writes the object's size in zeros, as a download would; counts the downloads. */
function fakeFetch(): { fetch: FetchObject; downloads: () => number } {
  let count = 0;
  const fetch: FetchObject = async (object, dest) => {
    count++;
    await writeFile(dest, Buffer.alloc(object.size));
  };
  return { fetch, downloads: () => count };
}

describe('the local model cache under a disk limit (CacheSpace)', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-cache-space-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('keeps versions no model loads until the limit needs room, then deletes the least recently used of them', async () => {
    const space = new CacheSpace(250, logger);
    const cache = new ModelCache(dir, logger, 2, space);
    const { fetch, downloads } = fakeFetch();
    for (const name of ['a', 'b']) await cache.update(listing(name, 100), [1], fetch);
    // Nothing loads a and b any more: they stay cached.
    await cache.prune('a', [], []);
    await cache.prune('b', [], []);
    expect(await readdir(dir)).toEqual(expect.arrayContaining(['a', 'b']));
    expect(space.bytes).toBe(200);
    // a is used again (up to date: no download), then c comes: b, the least recently used, goes.
    await cache.update(listing('a', 100), [1], fetch);
    await cache.prune('a', [], []);
    await cache.update(listing('c', 100), [1], fetch);
    expect(downloads()).toBe(3);
    expect(await readdir(join(dir, 'b'))).not.toContain('1');
    expect(await readdir(join(dir, 'a'))).toContain('1');
    expect(space.bytes).toBe(200);
    expect(space.deletions).toBe(1);
  });

  it('never deletes a version a loaded version reads, and counts what an earlier run left as least recently used', async () => {
    await mkdir(join(dir, 'old', '1'), { recursive: true });
    await writeFile(
      join(dir, 'old', '1', '.batchwise-objects.json'),
      JSON.stringify({ files: { 'model.onnx': { etag: 'x', size: 100 } } }),
    );
    const space = new CacheSpace(150, logger);
    const cache = new ModelCache(dir, logger, 2, space);
    const { fetch } = fakeFetch();
    await cache.update(listing('a', 100), [1], fetch); // held: loading
    await cache.update(listing('b', 100), [1], fetch); // held too
    expect(await readdir(dir)).toEqual(expect.arrayContaining(['a', 'b']));
    expect(await readdir(join(dir, 'old'))).not.toContain('1');
    expect(space.bytes).toBe(200); // over the limit: both are loaded
    await cache.prune('a', [1], [1]);
    await cache.prune('b', [1], []);
    expect(await readdir(join(dir, 'a'))).toContain('1');
    expect(await readdir(join(dir, 'b'))).not.toContain('1');
    expect(space.bytes).toBe(100);
  });
});
