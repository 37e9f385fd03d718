import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileErrorText, modelRelativeMessage, resolveInModelFolder } from './model-paths.ts';

describe('resolveInModelFolder', () => {
  let root: string;
  let model: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'batchwise-paths-'));
    model = join(root, 'repo', 'm');
    await mkdir(join(model, '1', 'sub'), { recursive: true });
    await writeFile(join(model, '1', 'model.onnx'), 'weights');
    await writeFile(join(model, 'labels.txt'), 'a\nb');
    await writeFile(join(root, 'secret'), 'outside');
    await symlink(join(root, 'secret'), join(model, '1', 'out.onnx'));
    await symlink(join(model, 'labels.txt'), join(model, '1', 'in.txt'));
    await symlink(root, join(model, '1', 'sub', 'up'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  const what = "model 'm': default_model_filename";

  it('resolves names inside the model folder, from the folder they are relative to', async () => {
    expect(await resolveInModelFolder(model, '1', 'model.onnx', what)).toMatch(/\/repo\/m\/1\/model\.onnx$/);
    expect(await resolveInModelFolder(model, '1', '../labels.txt', what)).toMatch(/\/repo\/m\/labels\.txt$/);
    expect(await resolveInModelFolder(model, '', 'labels.txt', what)).toMatch(/\/repo\/m\/labels\.txt$/);
    // A link that stays inside is followed; a name that does not exist (yet) opens nothing and passes.
    expect(await readFile(await resolveInModelFolder(model, '1', 'in.txt', what), 'utf8')).toBe('a\nb');
    expect(await resolveInModelFolder(model, '1', 'missing.onnx', what)).toMatch(/\/repo\/m\/1\/missing\.onnx$/);
  });

  it('refuses a name that leaves it, normalised or through a link, naming the field and the path as written only', async () => {
    const refusal = (path: string) =>
      resolveInModelFolder(model, '1', path, what).then(
        () => 'resolved',
        (error: Error) => error.message,
      );
    for (const path of ['../../secret', '../../../../../../../etc/passwd', '/etc/passwd', '..']) {
      const message = await refusal(path);
      expect(message, path).toBe(`model 'm': default_model_filename '${path}' must name a file inside the model's folder`);
      expect(message).not.toContain(root);
    }
    // The name is inside; a link on its way leads out: said so, with the fix, and still no server path.
    for (const path of ['out.onnx', 'sub/up/secret']) {
      const message = await refusal(path);
      expect(message, path).toBe(
        `model 'm': default_model_filename '${path}' must name a file inside the model's folder: a symbolic link on its way leads out of it (copy the file into the model's folder, or use a hard link)`,
      );
      expect(message).not.toContain(root);
    }
    await expect(resolveInModelFolder(model, '', '.', "model 'm': label_filename")).rejects.toThrow(/must name a file inside/);
  });
});

describe('messages about a model', () => {
  it("write the model's folders as its name, as plain paths and as file URLs", () => {
    const roots = ['/srv/models/resnet', '/tmp/cache/0123/resnet', 's3://bucket/prod/resnet'];
    expect(
      modelRelativeMessage(
        `Load model from /srv/models/resnet/1/model.onnx failed; cannot import ${pathToFileURL('/tmp/cache/0123/resnet/2/model.mjs').href}; s3://bucket/prod/resnet/3/model.onnx changed`,
        'resnet',
        roots,
      ),
    ).toBe('Load model from resnet/1/model.onnx failed; cannot import resnet/2/model.mjs; resnet/3/model.onnx changed');
  });

  it("say what went wrong with a file without Node's path", async () => {
    const error = await readFile('/nonexistent/batchwise/file').catch((e: unknown) => e);
    expect(fileErrorText(error)).toBe('no such file or directory (ENOENT)');
    expect(fileErrorText(new Error('plain'))).toBe('plain');
  });
});
