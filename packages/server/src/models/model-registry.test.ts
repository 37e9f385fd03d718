import { describe, expect, it } from 'vitest';
import type { ListedModel, ModelSource } from '../repository/model-source.ts';
import type { LoadedVersion } from './loaded-version.ts';
import { ModelTable } from './model-registry.ts';
import { RepositoryScan } from './repository-scan.ts';

const listed = (name: string): ListedModel => ({
  name,
  localize: () => Promise.reject(new Error('not used')),
  prune: async () => undefined,
  modelRelative: (message) => message,
});
const source = (location: string, names: string[]): ModelSource => ({
  kind: 'local',
  location,
  listModels: async () => names.map(listed),
  findModel: async (name) => (names.includes(name) ? listed(name) : undefined),
  list: () => Promise.reject(new Error('not used')),
});
const version = (modelName: string, v: string) => ({ modelName, version: v, config: { name: modelName } }) as unknown as LoadedVersion;

describe('RepositoryScan', () => {
  it('lists every repository and leaves out a name found in two, remembering it', async () => {
    const scan = new RepositoryScan([source('/a', ['x', 'both']), source('/b', ['y', 'both'])]);
    expect([...(await scan.scan()).keys()].sort()).toEqual(['x', 'y']);
    expect([...scan.names].sort()).toEqual(['both', 'x', 'y']);
    expect([...scan.duplicates]).toEqual(['both']);
    expect(scan.locations).toBe('/a, /b');
  });
});

describe('ModelTable, the read side', () => {
  const table = () => {
    const t = new ModelTable({ names: new Set(['m', 'idle', 'dup']), duplicates: new Set(['dup']) });
    const m = t.entryFor('m');
    Object.assign(m, { state: 'READY', wanted: true });
    m.serving.set('2', { loaded: version('m', '2'), fingerprint: '', dir: '' });
    m.serving.set('10', { loaded: version('m', '10'), fingerprint: '', dir: '' });
    m.failedVersions.set('3', 'broken');
    return t;
  };

  it('resolves the named version, or the highest serving one when none is named', () => {
    const t = table();
    expect(t.resolve('m').version).toBe('10');
    expect(t.resolve('m', '2').version).toBe('2');
    expect(() => t.resolve('m', '3')).toThrow(/unknown model: 'm' version 3/);
    expect(() => t.resolve('nope')).toThrow(/unknown model: 'nope'/);
    expect(t.readyVersions('m')).toEqual(['2', '10']);
    expect(t.isModelReady('m')).toBe(true);
    expect(t.isModelReady('m', '3')).toBe(false);
    expect(t.allReady()).toBe(true);
  });

  it("indexes the repositories' models as Triton does: name only when never loaded, a duplicate UNAVAILABLE", () => {
    const t = table();
    expect(t.index(false)).toEqual([
      { name: 'dup', state: 'UNAVAILABLE', reason: 'model appears in two or more repositories' },
      { name: 'idle' },
      // By version, as Triton's index lists them.
      { name: 'm', version: '2', state: 'READY', reason: '' },
      { name: 'm', version: '3', state: 'UNAVAILABLE', reason: 'broken' },
      { name: 'm', version: '10', state: 'READY', reason: '' },
    ]);
    expect(t.index(true).map((r) => r.version)).toEqual(['2', '10']);
  });
});
