import { errorAt, type Pos } from './position.ts';

export type Token =
  | { readonly kind: 'ident'; readonly text: string; readonly pos: Pos }
  | { readonly kind: 'number'; readonly text: string; readonly isFloat: boolean; readonly pos: Pos }
  | { readonly kind: 'string'; readonly bytes: Uint8Array; readonly pos: Pos }
  | { readonly kind: 'symbol'; readonly text: string; readonly pos: Pos }
  | { readonly kind: 'eof'; readonly pos: Pos };

const SYMBOLS = new Set(['{', '}', '<', '>', '[', ']', ':', ',', ';', '-', '.', '/']);
const SIMPLE_ESCAPES: Readonly<Record<string, number>> = {
  n: 0x0a,
  t: 0x09,
  r: 0x0d,
  '\\': 0x5c,
  "'": 0x27,
  '"': 0x22,
  '?': 0x3f,
  a: 0x07,
  b: 0x08,
  f: 0x0c,
  v: 0x0b,
};

const isDigit = (c: string) => c >= '0' && c <= '9';
const isHex = (c: string) => /^[0-9a-fA-F]$/.test(c);
const isOctal = (c: string) => c >= '0' && c <= '7';
const isIdentStart = (c: string) => /^[A-Za-z_]$/.test(c);
const isIdentPart = (c: string) => /^[A-Za-z0-9_]$/.test(c);

/** Splits protobuf text format into tokens; string escapes are decoded to bytes here. */
export function tokenize(text: string, fileName: string): Token[] {
  const tokens: Token[] = [];
  // A UTF-8 byte order mark, as some Windows editors write, is not part of the text.
  let i = text.startsWith('\ufeff') ? 1 : 0;
  let line = 1;
  let lineStart = i;
  const pos = (at = i): Pos => ({ line, col: at - lineStart + 1 });
  const fail = (message: string, at = i): never => {
    throw errorAt(fileName, pos(at), message);
  };
  const ch = (at: number) => text[at] ?? '';

  while (i < text.length) {
    const c = text[i]!;
    if (c === '\n') {
      i++;
      line++;
      lineStart = i;
    } else if (c === ' ' || c === '\t' || c === '\r' || c === '\v' || c === '\f') {
      i++;
    } else if (c === '#') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (isIdentStart(c)) {
      const start = i;
      while (isIdentPart(ch(i))) i++;
      tokens.push({ kind: 'ident', text: text.slice(start, i), pos: pos(start) });
    } else if (isDigit(c) || (c === '.' && isDigit(ch(i + 1)))) {
      tokens.push(readNumber());
    } else if (c === '"' || c === "'") {
      tokens.push(readString(c));
    } else if (SYMBOLS.has(c)) {
      tokens.push({ kind: 'symbol', text: c, pos: pos() });
      i++;
    } else {
      fail(`unexpected character ${JSON.stringify(String.fromCodePoint(text.codePointAt(i)!))}`);
    }
  }
  tokens.push({ kind: 'eof', pos: pos() });
  return tokens;

  function readNumber(): Token {
    const start = i;
    let isFloat = false;
    if (ch(i) === '0' && (ch(i + 1) === 'x' || ch(i + 1) === 'X')) {
      i += 2;
      if (!isHex(ch(i))) fail('expected hex digits after "0x"');
      while (isHex(ch(i))) i++;
    } else {
      while (isDigit(ch(i))) i++;
      if (ch(i) === '.') {
        isFloat = true;
        i++;
        while (isDigit(ch(i))) i++;
      }
      if (ch(i) === 'e' || ch(i) === 'E') {
        isFloat = true;
        i++;
        if (ch(i) === '+' || ch(i) === '-') i++;
        if (!isDigit(ch(i))) fail('expected digits in exponent');
        while (isDigit(ch(i))) i++;
      }
      if (ch(i) === 'f' || ch(i) === 'F') {
        isFloat = true;
        i++;
      }
      const body = text.slice(start, i);
      if (!isFloat && body.length > 1 && body[0] === '0' && ![...body].every(isOctal)) {
        fail(`invalid octal number '${body}'`, start);
      }
    }
    if (isIdentPart(ch(i)) || ch(i) === '.') {
      fail('a number must be followed by a space or a symbol');
    }
    return { kind: 'number', text: text.slice(start, i), isFloat, pos: pos(start) };
  }

  function readString(quote: string): Token {
    const start = i;
    const bytes: number[] = [];
    const encoder = new TextEncoder();
    i++;
    for (;;) {
      if (i >= text.length || text[i] === '\n') fail('unterminated string literal', start);
      const c = text[i]!;
      if (c === quote) {
        i++;
        break;
      }
      if (c !== '\\') {
        const cp = text.codePointAt(i)!;
        const s = String.fromCodePoint(cp);
        bytes.push(...encoder.encode(s));
        i += s.length;
        continue;
      }
      const escAt = i;
      const e = ch(i + 1);
      i += 2;
      if (e in SIMPLE_ESCAPES) {
        bytes.push(SIMPLE_ESCAPES[e]!);
      } else if (isOctal(e)) {
        let value = Number(e);
        for (let n = 0; n < 2 && isOctal(ch(i)); n++) value = value * 8 + Number(text[i++]);
        if (value > 0xff) fail(`octal escape '${text.slice(escAt, i)}' is above \\377`, escAt);
        bytes.push(value);
      } else if (e === 'x' || e === 'X') {
        let digits = '';
        while (digits.length < 2 && isHex(ch(i))) digits += text[i++];
        if (!digits) fail("expected hex digits after '\\x'", escAt);
        bytes.push(parseInt(digits, 16));
      } else if (e === 'u' || e === 'U') {
        const width = e === 'u' ? 4 : 8;
        const digits = text.slice(i, i + width);
        if (digits.length !== width || ![...digits].every(isHex)) {
          fail(`expected ${width} hex digits after '\\${e}'`, escAt);
        }
        i += width;
        let cp = parseInt(digits, 16);
        if (cp >= 0xd800 && cp <= 0xdbff && ch(i) === '\\' && ch(i + 1) === 'u') {
          const low = parseInt(text.slice(i + 2, i + 6), 16);
          if (low >= 0xdc00 && low <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            i += 6;
          }
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
          fail(`escape '${text.slice(escAt, i)}' is not a Unicode scalar value`, escAt);
        }
        bytes.push(...encoder.encode(String.fromCodePoint(cp)));
      } else {
        fail(`invalid escape sequence '\\${e}'`, escAt);
      }
    }
    return { kind: 'string', bytes: Uint8Array.from(bytes), pos: pos(start) };
  }
}
