/**
 * The docs hold together: every relative link of README.md, docs/ and the packages' READMEs names a
 * file that exists, and a `#fragment` a heading of that file (GitHub's anchors); README.md stays an
 * entry page (at most 14 KB: what Batchwise is, the two commands, an example per capability, links),
 * and every page of docs/ one a reader takes in at one sitting (at most 25 KB: split a longer page by
 * topic, or put reference detail in the code's comments).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fencedBlocks } from './support/doc-blocks.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const README_MAX_BYTES = 14_000;
const DOCS_PAGE_MAX_BYTES = 25_000;

const FILES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  ...readdirSync(join(ROOT, 'packages'))
    .map((p) => `packages/${p}/README.md`)
    .filter((f) => existsSync(join(ROOT, f))),
  'bench/README.md',
  'infra/README.md',
  ...readdirSync(join(ROOT, 'infra/docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `infra/docs/${f}`),
];

/** The markdown outside fenced blocks and inline code, where links are links. */
function prose(file: string): string[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  for (const block of fencedBlocks(file, lines.join('\n'))) {
    for (let i = block.line - 1; i <= block.line + block.lines.length; i++) lines[i] = '';
  }
  return lines.map((l) => l.replace(/`[^`]*`/g, '``'));
}

/** GitHub's heading anchors: lowercase, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  const fenced = new Set(
    fencedBlocks(file, lines.join('\n')).flatMap((b) => Array.from({ length: b.lines.length + 2 }, (_, k) => b.line - 1 + k)),
  );
  lines.forEach((line, i) => {
    const heading = !fenced.has(i) && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) return;
    const text = heading[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    result.add(count === 0 ? slug : `${slug}-${count}`);
  });
  return result;
}

describe('the docs', () => {
  it('link only to files that exist and to headings those files have', () => {
    const broken: string[] = [];
    for (const file of FILES) {
      prose(file).forEach((line, i) => {
        for (const [, target] of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
          if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue; // https:, mailto:
          const [path, fragment] = target!.split('#') as [string, string | undefined];
          const linked = path === '' ? file : relative(ROOT, join(dirname(join(ROOT, file)), decodeURIComponent(path)));
          const where = `${file}:${i + 1}: ${target}`;
          if (!existsSync(join(ROOT, linked))) broken.push(`${where} (no ${linked})`);
          else if (fragment !== undefined && linked.endsWith('.md') && statSync(join(ROOT, linked)).isFile()) {
            if (!anchors(linked).has(fragment)) broken.push(`${where} (no heading #${fragment} in ${linked})`);
          }
        }
      });
    }
    expect(broken).toEqual([]);
  });

  it(`README.md is an entry page of at most ${README_MAX_BYTES} bytes (the rest belongs in docs/)`, () => {
    expect(Buffer.byteLength(readFileSync(join(ROOT, 'README.md')))).toBeLessThanOrEqual(README_MAX_BYTES);
  });

  it(`every page of docs/ is at most ${DOCS_PAGE_MAX_BYTES} bytes`, () => {
    const pages = FILES.filter((f) => f.startsWith('docs/'));
    expect(pages.length).toBeGreaterThan(10);
    const over = pages
      .map((f) => ({ page: f, bytes: Buffer.byteLength(readFileSync(join(ROOT, f))) }))
      .filter(({ bytes }) => bytes > DOCS_PAGE_MAX_BYTES)
      .map(({ page, bytes }) => `${page}: ${bytes} bytes`);
    expect(over).toEqual([]);
  });
});
