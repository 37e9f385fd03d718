import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalModelSource } from '../repository/local-model-source.ts';
import type { ModelSource } from '../repository/model-source.ts';
import { parseModelFilter } from './model-filter.ts';
import { MISS_MEMORY_MS, RepositoryScan } from './repository-scan.ts';

describe('parseModelFilter (--model-filter)', () => {
  it('admits the names and the prefixes given, comma-separated or repeated', () => {
    const filter = parseModelFilter(['resnet50, bert-*', 'tiny'])!;
    expect(filter.description).toBe('resnet50, bert-*, tiny');
    for (const name of ['resnet50', 'bert-', 'bert-large', 'tiny']) expect(filter.admits(name), name).toBe(true);
    for (const name of ['resnet', 'resnet50x', 'bert', 'Bert-large', 'tiny2']) expect(filter.admits(name), name).toBe(false);
    expect(parseModelFilter(['*'])!.admits('anything')).toBe(true);
    expect(parseModelFilter([])).toBeUndefined();
  });

  it('refuses an empty entry and a * anywhere but at the end, naming the flag', () => {
    expect(() => parseModelFilter(['a,,b'])).toThrow("--model-filter 'a,,b': '' is neither a model name nor a prefix followed by *");
    expect(() => parseModelFilter(['a*b'])).toThrow("'a*b' is neither a model name nor a prefix followed by *");
    expect(() => parseModelFilter(['**'])).toThrow("'**' is neither");
  });
});

describe('RepositoryScan on real folders', () => {
  let dir: string;
  let repo: string;
  const addModel = (name: string, where = repo) => mkdir(join(where, name, '1'), { recursive: true });
  /** The source, counting its looks for single models. */
  const counted = (source: LocalModelSource) => {
    const looks: string[] = [];
    const wrapped: ModelSource = {
      kind: source.kind,
      location: source.location,
      listModels: () => source.listModels(),
      list: () => source.list(),
      findModel: (name) => {
        looks.push(name);
        return source.findModel(name);
      },
    };
    return { wrapped, looks };
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-repository-scan-'));
    repo = join(dir, 'repo');
    await mkdir(repo);
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('finds a model added after the listing with one look for it alone, shared by concurrent requests', async () => {
    const { wrapped, looks } = counted(new LocalModelSource(repo));
    const scan = new RepositoryScan([wrapped]);
    await addModel('old');
    await scan.scan();
    await addModel('new');
    const found = await Promise.all([scan.find('new'), scan.find('new'), scan.find('new')]);
    expect(found.map((f) => f?.name)).toEqual(['new', 'new', 'new']);
    expect(looks).toEqual(['new']);
    expect([...scan.found.keys()].sort()).toEqual(['new', 'old']);
    expect([...scan.names].sort()).toEqual(['new', 'old']);
    // What the listing found costs no look.
    expect((await scan.find('old'))?.name).toBe('old');
    expect(looks).toEqual(['new']);
  });

  it('answers a name no repository has from memory for a moment, then looks again', async () => {
    const { wrapped, looks } = counted(new LocalModelSource(repo));
    const scan = new RepositoryScan([wrapped]);
    await scan.scan();
    expect(await scan.find('later')).toBeUndefined();
    expect(await scan.find('later')).toBeUndefined();
    expect(looks).toEqual(['later']);
    await addModel('later');
    await new Promise((resolve) => setTimeout(resolve, MISS_MEMORY_MS + 50));
    expect((await scan.find('later'))?.name).toBe('later');
    expect(looks).toEqual(['later', 'later']);
  });

  it('never looks for a name that cannot be a model folder, nor for one outside the filter', async () => {
    const { wrapped, looks } = counted(new LocalModelSource(repo));
    const scan = new RepositoryScan([wrapped], parseModelFilter(['text-*']));
    await addModel('vision');
    await addModel('text-a');
    expect([...(await scan.scan()).keys()]).toEqual(['text-a']);
    expect([...scan.names]).toEqual(['text-a']);
    for (const name of ['vision', '../repo', '.hidden', 'a/b']) expect(await scan.find(name), name).toBeUndefined();
    expect(looks).toEqual([]);
    expect(scan.admits('vision')).toBe(false);
  });

  it('finds nothing for a model two repositories have (the listing reports it), and keeps a model a listing begun before it missed', async () => {
    const other = join(dir, 'other');
    await mkdir(other);
    const scan = new RepositoryScan([new LocalModelSource(repo), new LocalModelSource(other)]);
    await scan.scan();
    await addModel('twice');
    await addModel('twice', other);
    expect(await scan.find('twice')).toBeUndefined();
    // A listing whose pass ran before the upload, and ended after a look found the model, keeps it.
    const local = new LocalModelSource(repo);
    let listed!: () => void;
    const passDone = new Promise<void>((resolve) => (listed = resolve));
    let finish!: () => void;
    const held = new Promise<void>((resolve) => (finish = resolve));
    const slow: ModelSource = {
      ...counted(local).wrapped,
      listModels: async () => {
        const models = await local.listModels();
        listed();
        await held;
        return models;
      },
    };
    const late = new RepositoryScan([slow]);
    const listing = late.scan();
    await passDone;
    await addModel('fresh');
    expect((await late.find('fresh'))?.name).toBe('fresh');
    finish();
    await listing;
    expect(late.found.has('fresh')).toBe(true);
    expect([...late.names]).toContain('fresh');
    await scan.scan();
    expect([...scan.duplicates]).toEqual(['twice']);
  });
});
