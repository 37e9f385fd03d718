import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { main } from './cli.ts';
import { writeExampleRepository } from './examples.ts';
import { parseModel, serializeModel } from './graph-builder.ts';
import { identity, mlp } from './models.ts';

describe('cli', () => {
  let tmp = '';
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('writes models by name with options, one JSON line each', async () => {
    tmp = await mkdtemp(join(tmpdir(), 'modelgen-cli-'));
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    await main(['mlp', join(tmp, 'mlp.onnx'), '--layers', '2', '--width', '16', '--seed', '3']);
    await main(['identity', join(tmp, 'id.onnx'), '--datatype', 'string', '--dims', '2,-1']);
    await main(['examples', join(tmp, 'repo')]);
    const lines = log.mock.calls.map((c) => JSON.parse(String(c[0])) as Record<string, unknown>);
    log.mockRestore();
    expect(lines[0]).toMatchObject({ event: 'wrote', model: 'mlp' });
    expect(lines.length).toBe(2 + (await writeExampleRepository(join(tmp, 'repo-again'))).length);
    const mlpBytes = await readFile(join(tmp, 'mlp.onnx'));
    expect(mlpBytes.equals(Buffer.from(serializeModel(mlp({ layers: 2, width: 16, seed: 3 }))))).toBe(true);
    const idBytes = await readFile(join(tmp, 'id.onnx'));
    expect(idBytes.equals(Buffer.from(serializeModel(identity('BYTES', [2, -1]))))).toBe(true);
    expect(parseModel(await readFile(join(tmp, 'repo', 'simple', '1', 'model.onnx'))).graph!.name).toBe('simple');
  });

  it('rejects unknown models and bad options', async () => {
    await expect(main(['nope', 'x.onnx'])).rejects.toThrow(/unknown model/);
    await expect(main(['mlp', 'x.onnx', '--width', '8'])).rejects.toThrow(/--layers is required/);
    await expect(main(['identity', 'x.onnx', '--datatype', 'COMPLEX'])).rejects.toThrow(/--datatype/);
    await expect(main(['simple'])).rejects.toThrow(/usage/);
  });
});
