/**
 * Reading the shell blocks of the docs: fenced blocks, the commands in them as written, the output
 * the docs show after each command, and whether the output a command printed matches it.
 *
 * In a block, a comment is the output the command before it prints (`# 200`, `# {"name":...}`,
 * also after the command on its own line), except:
 * - `# not run by the tests: <why>` anywhere in the block: the block is not run, for that reason;
 * - a comment beginning with `...`: a description of the output, which goes on over the following
 *   comment lines up to the next command or blank line.
 * In output the docs show, `...` stands for any text, and a number written with decimals stands for
 * any number that rounds to it (`0.91` for 0.9107...); whitespace runs compare equal.
 */
import { readFileSync } from 'node:fs';

export interface DocBlock {
  /** Path of the markdown file, relative to the repository root. */
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The fence's info string (`sh`, `json`, '' ...). */
  readonly lang: string;
  /** The block's lines, the fence's indentation removed. */
  readonly lines: readonly string[];
}

export interface DocCommand {
  /** The command as written (continuation lines and multi-line quotes included), its trailing comment removed. */
  readonly text: string;
  /** 1-based line in the markdown file. */
  readonly line: number;
  /** The output the docs show for it, one entry per line. */
  readonly expected: readonly string[];
}

export interface ShellBlock extends DocBlock {
  readonly commands: readonly DocCommand[];
  /** Why the block is not run, from its `# not run by the tests: <why>` comment. */
  readonly notRun?: string;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/;
export const NOT_RUN = /^#\s*not run by the tests:\s*(.+)$/;

/** Every fenced block of a markdown file. */
export function fencedBlocks(file: string, markdown: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    const body: string[] = [];
    let j = i + 1;
    const closes = (line: string) => new RegExp(`^${fence![0]}{${fence!.length},}\\s*$`).test(line.trim());
    for (; j < lines.length && !closes(lines[j]!); j++) {
      body.push(lines[j]!.startsWith(indent!) ? lines[j]!.slice(indent!.length) : lines[j]!.trimStart());
    }
    blocks.push({ file, line: i + 1, lang: lang!, lines: body });
    i = j;
  }
  return blocks;
}

/** Where an unquoted `#` starts a comment in `line` (-1 for none), and the quote state after the line. */
function scanLine(line: string, quote: '' | "'" | '"'): { comment: number; quote: '' | "'" | '"' } {
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = '';
    } else if (quote === '"') {
      if (c === '\\') i++;
      else if (c === '"') quote = '';
    } else if (c === '\\') i++;
    else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return { comment: i, quote };
  }
  return { comment: -1, quote };
}

/** The commands of a shell block, each with the output the block shows for it. */
export function shellBlock(block: DocBlock): ShellBlock {
  const commands: { text: string; line: number; expected: string[] }[] = [];
  let notRun: string | undefined;
  let describing = false;
  const comment = (text: string): void => {
    const marker = NOT_RUN.exec(text);
    if (marker) {
      notRun = marker[1]!.trim();
      return;
    }
    const body = text.replace(/^#\s?/, '');
    if (body.trimStart().startsWith('...')) describing = true;
    if (describing) return;
    const last = commands.at(-1);
    if (!last) throw new Error(`${block.file}:${block.line}: output '${body}' shown before any command`);
    last.expected.push(body);
  };
  for (let i = 0; i < block.lines.length; i++) {
    const line = block.lines[i]!;
    if (line.trim() === '') {
      describing = false;
      continue;
    }
    if (line.trimStart().startsWith('#')) {
      comment(line.trim());
      continue;
    }
    describing = false;
    const start = i;
    const text: string[] = [];
    let quote: '' | "'" | '"' = '';
    let trailing: string | undefined;
    for (;;) {
      const current = block.lines[i]!;
      const scanned = scanLine(current, quote);
      quote = scanned.quote;
      const code = scanned.comment < 0 ? current : current.slice(0, scanned.comment).trimEnd();
      if (scanned.comment >= 0) trailing = current.slice(scanned.comment).trim();
      text.push(code);
      const continues = quote !== '' || (scanned.comment < 0 && code.endsWith('\\'));
      if (!continues || i + 1 >= block.lines.length) break;
      i++;
    }
    commands.push({ text: text.join('\n'), line: block.line + 1 + start, expected: [] });
    if (trailing !== undefined) comment(trailing);
  }
  return { ...block, commands, ...(notRun !== undefined && { notRun }) };
}

/** The shell blocks (```sh, ```bash, ```shell) of the given markdown files. */
export function shellBlocks(root: string, files: readonly string[]): ShellBlock[] {
  return files.flatMap((file) =>
    fencedBlocks(file, readFileSync(new URL(file, root), 'utf8'))
      .filter((b) => ['sh', 'bash', 'shell'].includes(b.lang))
      .map(shellBlock),
  );
}

const DECIMAL = /-?\d+\.\d+(?![\d.])/y;
const ANY_NUMBER = '(-?\\d+(?:\\.\\d+)?(?:[eE][-+]?\\d+)?)';
const normalize = (s: string) => s.replace(/\r$/, '').replace(/\s+/g, ' ').trim();

/** Whether one printed line is the line the docs show (`...` and rounded decimals as described above). */
export function lineMatches(shown: string, printed: string): boolean {
  const text = normalize(shown);
  let pattern = '';
  const decimals: string[] = [];
  for (let i = 0; i < text.length;) {
    if (text.startsWith('...', i)) {
      pattern += '.*?';
      i += 3;
      continue;
    }
    DECIMAL.lastIndex = i;
    const number = (i === 0 || !/[\w.]/.test(text[i - 1]!)) && DECIMAL.exec(text);
    if (number) {
      pattern += ANY_NUMBER;
      decimals.push(number[0]);
      i += number[0].length;
      continue;
    }
    pattern += text[i]!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    i++;
  }
  const match = new RegExp(`^${pattern}$`).exec(normalize(printed));
  if (!match) return false;
  return decimals.every((d, k) => {
    const places = d.split('.')[1]!.length;
    return Math.abs(Number(match[k + 1]) - Number(d)) <= 0.5 * 10 ** -places * (1 + 1e-9);
  });
}

/** The lines the docs show that `printed` lacks, in order (each shown line must follow the one before). */
export function missingOutput(shown: readonly string[], printed: string): string[] {
  const lines = printed.split('\n');
  let at = 0;
  const missing: string[] = [];
  for (const line of shown) {
    const found = lines.findIndex((p, k) => k >= at && lineMatches(line, p));
    if (found < 0) missing.push(line);
    else at = found + 1;
  }
  return missing;
}
