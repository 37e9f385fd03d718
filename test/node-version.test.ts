/**
 * One Node version (issue 35): the version README names is the one the image runs, `engines`
 * asks for and CI tests; the older line the tree still runs on
 * (docs/development.md, "Node versions") is the one `@types/node` and CI's second entry name.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, ROOT), 'utf8');
const json = (path: string) => JSON.parse(read(path)) as { engines?: { node?: string }; devDependencies?: Record<string, string> };

/** The workspace's package.json files: the root's and each project's of pnpm-workspace.yaml. */
function packageFiles(): string[] {
  const projects = [...read('pnpm-workspace.yaml').matchAll(/^ {2}- (\S+)$/gm)].map((m) => m[1]!);
  const folders = projects.flatMap((pattern) =>
    pattern.endsWith('/*') ? readdirSync(new URL(pattern.slice(0, -1), ROOT)).map((name) => `${pattern.slice(0, -1)}${name}`) : [pattern],
  );
  return ['package.json', ...folders.map((f) => `${f}/package.json`).filter((f) => existsSync(new URL(f, ROOT)))];
}

describe('one Node version', () => {
  const fromLines = [...read('Dockerfile').matchAll(/^FROM node:(\d+)-/gm)].map((m) => Number(m[1]));
  const supported = fromLines[0]!;

  it('the image builds and runs on one Node line, the one README names', () => {
    expect(fromLines.length).toBeGreaterThan(0);
    expect(new Set(fromLines)).toEqual(new Set([supported]));
    expect(read('README.md')).toContain(`needs Node.js ${supported}`);
  });

  it("the workspace's engines and the shipped server's ask for it, and no package.json asks for another", () => {
    const engines = Object.fromEntries(packageFiles().map((file) => [file, json(file).engines?.node]));
    expect(Object.keys(engines).length).toBeGreaterThan(5);
    expect(engines['package.json']).toBe(`>=${supported}`);
    // Its package.json is the root of the image's tree (pnpm deploy).
    expect(engines['packages/server/package.json']).toBe(`>=${supported}`);
    for (const [file, range] of Object.entries(engines)) if (range !== undefined) expect(range, file).toBe(`>=${supported}`);
  });

  it('CI tests it first and the older line the tree still runs on, the one @types/node is of; deploys use it', () => {
    const matrix = /^\s+node: \[(\d+), (\d+)\]$/m.exec(read('.github/workflows/ci.yml'));
    expect(matrix, 'ci.yml: matrix node: [supported, older]').not.toBeNull();
    expect(Number(matrix![1])).toBe(supported);
    const older = Number(matrix![2]);
    expect(older).toBeLessThan(supported);
    expect(json('package.json').devDependencies?.['@types/node']?.split('.')[0]).toBe(String(older));
    expect(read('README.md')).toContain(`Node ${older} still runs it`);
    for (const workflow of ['deploy.yml', 'promote-model.yml']) {
      const versions = [...read(`.github/workflows/${workflow}`).matchAll(/node-version: (\S+)/g)].map((m) => m[1]);
      expect(versions, workflow).toEqual([String(supported)]);
    }
  });
});
