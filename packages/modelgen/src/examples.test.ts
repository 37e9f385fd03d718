import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_MODELS, writeExampleRepository } from './examples.ts';
import { loadOrt } from '../test-support/ort.ts';

const COMMITTED = new URL('../../../examples/model_repository/', import.meta.url).pathname;

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

describe('example repository', () => {
  let tmp = '';
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('matches the committed files byte for byte (regenerate: pnpm examples)', async () => {
    tmp = await mkdtemp(join(tmpdir(), 'modelgen-examples-'));
    const written = await writeExampleRepository(tmp);
    const generated = await listFiles(tmp);
    expect(written.map((f) => f.path).sort()).toEqual(generated);
    for (const rel of generated) {
      const [fresh, committed] = await Promise.all([readFile(join(tmp, rel)), readFile(join(COMMITTED, rel)).catch(() => null)]);
      expect(committed, `${rel} is missing from examples/model_repository`).not.toBeNull();
      expect(fresh.equals(committed!), `${rel} drifted from the generator`).toBe(true);
      expect(fresh.byteLength).toBeLessThan(200 * 1024);
    }
    // The example models' folders hold nothing else (autocomplete_fp32 has no config.pbtxt).
    for (const ex of EXAMPLE_MODELS) {
      const committedFiles = (await listFiles(join(COMMITTED, ex.name))).map((f) => join(ex.name, f));
      expect(committedFiles).toEqual(generated.filter((f) => f.startsWith(`${ex.name}/`)));
    }
    expect(generated).not.toContain('autocomplete_fp32/config.pbtxt');
  });

  it('every committed model loads in onnxruntime-node', async () => {
    const ort = loadOrt();
    for (const ex of EXAMPLE_MODELS) {
      const s = await ort.InferenceSession.create(await readFile(join(COMMITTED, ex.name, '1', 'model.onnx')));
      expect(s.inputNames.length).toBeGreaterThan(0);
      await s.release();
    }
  });

  it('configs name their model and follow the requested settings', () => {
    const byName = Object.fromEntries(EXAMPLE_MODELS.map((e) => [e.name, e.config]));
    for (const ex of EXAMPLE_MODELS) if (ex.config) expect(ex.config).toContain(`name: "${ex.name}"`);
    expect(byName.simple).toContain('max_batch_size: 8');
    expect(byName.simple).toContain('max_queue_delay_microseconds: 100');
    expect(byName.identity_bytes).toContain('TYPE_STRING');
    expect(byName.identity_fp32).toContain('dims: [ -1 ]');
    expect(byName.convnet).toContain('max_batch_size: 16');
    expect(byName.convnet).toContain('dynamic_batching');
  });
});
