import { errorAt, type Pos } from './position.ts';
import { tokenize, type Token } from './tokenizer.ts';

/**
 * Schema-free syntax tree of protobuf text format. Whether a field is a message, a scalar
 * or repeated is decided later against the schema (see ../from-text.ts).
 */
export interface ScalarNode {
  readonly kind: 'scalar';
  readonly pos: Pos;
  readonly token: 'ident' | 'number' | 'string';
  /** Identifier or number as written; for strings the decoded, concatenated text. */
  readonly text: string;
  readonly negative: boolean;
  readonly isFloat: boolean;
}

export interface MessageNode {
  readonly kind: 'message';
  readonly pos: Pos;
  readonly fields: readonly FieldNode[];
}

export interface ListNode {
  readonly kind: 'list';
  readonly pos: Pos;
  readonly items: readonly (ScalarNode | MessageNode)[];
}

export type ValueNode = ScalarNode | MessageNode | ListNode;

export interface FieldNode {
  readonly name: string;
  readonly pos: Pos;
  /** Whether ':' followed the name; text format requires it before scalar values. */
  readonly colon: boolean;
  readonly value: ValueNode;
}

const MAX_NESTING = 100;
const CLOSER: Readonly<Record<string, string>> = { '{': '}', '<': '>' };

export function parseTextFormat(text: string, fileName: string): MessageNode {
  const tokens = tokenize(text, fileName);
  let at = 0;
  const utf8 = new TextDecoder('utf-8', { fatal: true });

  const peek = (): Token => tokens[at]!;
  const next = (): Token => tokens[at++]!;
  const isSymbol = (t: Token, s: string) => t.kind === 'symbol' && t.text === s;
  const describe = (t: Token): string => {
    switch (t.kind) {
      case 'eof':
        return 'end of file';
      case 'string':
        return 'a string';
      default:
        return `'${t.text}'`;
    }
  };
  const fail = (t: Token, message: string): never => {
    throw errorAt(fileName, t.pos, `${message}, found ${describe(t)}`);
  };

  return parseFields(null, { line: 1, col: 1 }, 0);

  function parseFields(closer: string | null, pos: Pos, depth: number): MessageNode {
    const fields: FieldNode[] = [];
    for (;;) {
      const t = peek();
      if (closer === null ? t.kind === 'eof' : isSymbol(t, closer)) {
        next();
        return { kind: 'message', pos, fields };
      }
      if (t.kind === 'eof') fail(t, `expected '${closer}' to close the message opened at ${pos.line}:${pos.col}`);
      fields.push(parseField(depth));
      const sep = peek();
      if (isSymbol(sep, ',') || isSymbol(sep, ';')) next();
    }
  }

  function parseField(depth: number): FieldNode {
    const nameToken = next();
    if (nameToken.kind !== 'ident') {
      if (isSymbol(nameToken, '[')) {
        throw errorAt(fileName, nameToken.pos, 'extension and Any fields ([...]) are not supported');
      }
      return fail(nameToken, 'expected a field name');
    }
    const name = nameToken.text;
    const colon = isSymbol(peek(), ':');
    if (colon) next();
    const t = peek();
    let value: ValueNode;
    if (isSymbol(t, '{') || isSymbol(t, '<')) {
      value = parseMessage(depth);
    } else if (isSymbol(t, '[')) {
      value = parseList(name, depth);
    } else if (colon) {
      value = parseScalar(name);
    } else {
      return fail(t, `expected ':' or '{' after field name '${name}'`);
    }
    return { name, pos: nameToken.pos, colon, value };
  }

  function parseMessage(depth: number): MessageNode {
    const open = next();
    if (depth + 1 > MAX_NESTING) {
      throw errorAt(fileName, open.pos, `messages nested deeper than ${MAX_NESTING} levels`);
    }
    return parseFields(CLOSER[(open as { text: string }).text]!, open.pos, depth + 1);
  }

  function parseList(name: string, depth: number): ListNode {
    const open = next();
    const items: (ScalarNode | MessageNode)[] = [];
    if (isSymbol(peek(), ']')) {
      next();
      return { kind: 'list', pos: open.pos, items };
    }
    for (;;) {
      const t = peek();
      items.push(isSymbol(t, '{') || isSymbol(t, '<') ? parseMessage(depth) : parseScalar(name));
      const sep = next();
      if (isSymbol(sep, ']')) return { kind: 'list', pos: open.pos, items };
      if (!isSymbol(sep, ',')) fail(sep, `expected ',' or ']' in the list of field '${name}'`);
    }
  }

  function parseScalar(name: string): ScalarNode {
    const first = next();
    if (first.kind === 'string') {
      const chunks = [first.bytes];
      while (peek().kind === 'string') chunks.push((next() as { bytes: Uint8Array }).bytes);
      let decoded: string;
      try {
        decoded = utf8.decode(Buffer.concat(chunks));
      } catch {
        throw errorAt(fileName, first.pos, `string value of field '${name}' is not valid UTF-8`);
      }
      return { kind: 'scalar', pos: first.pos, token: 'string', text: decoded, negative: false, isFloat: false };
    }
    let negative = false;
    let t: Token = first;
    if (isSymbol(first, '-')) {
      negative = true;
      t = next();
      if (t.kind !== 'number' && t.kind !== 'ident') fail(t, `expected a number after '-' for field '${name}'`);
    }
    if (t.kind === 'number') {
      return { kind: 'scalar', pos: first.pos, token: 'number', text: t.text, negative, isFloat: t.isFloat };
    }
    if (t.kind === 'ident') {
      return { kind: 'scalar', pos: first.pos, token: 'ident', text: t.text, negative, isFloat: false };
    }
    return fail(t, `expected a value for field '${name}'`);
  }
}
