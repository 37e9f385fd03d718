/**
 * KServe JSON as Triton reads and writes it (rapidjson with kParseNanAndInfFlag, 64-bit integers
 * exact), for requests (the server) and responses (the client): integer literals beyond 2^53 become bigints instead of rounded doubles, and the tokens NaN,
 * Infinity and -Infinity (which Python's json writes for tritonclient) are numbers.
 *
 * JSON.parse does the work whenever it can give the same result, which is nearly always: the
 * lossless parser below runs only when the text holds an integer literal of 16 or more digits
 * (the first length that can pass 2^53) or when JSON.parse refuses a text with one of the tokens.
 */
export function parseTritonJson(text: string): unknown {
  if (!LONG_INTEGER_LITERAL.test(text)) {
    try {
      return JSON.parse(text);
    } catch (error) {
      if (!NON_FINITE_TOKEN.test(text)) throw error;
    }
  }
  return parseJsonLosslessly(text);
}

// Digits not inside a fraction or exponent, nor followed by one; a match inside a string only
// costs the slower parse.
const LONG_INTEGER_LITERAL = /(?<![\d.eE+-])-?\d{16,}(?![\d.eE])/;
const NON_FINITE_TOKEN = /NaN|Infinity/;
const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
const NON_FINITE: ReadonlyArray<readonly [string, number]> = [
  ['NaN', NaN],
  ['Infinity', Infinity],
  ['-Infinity', -Infinity],
];
const LITERALS: ReadonlyArray<readonly [string, unknown]> = [['true', true], ['false', false], ['null', null], ...NON_FINITE];

type Frame = { readonly array: unknown[] } | { readonly object: Record<string, unknown>; key: string };

/** The lossless parser; iterative, so nesting depth cannot exhaust the stack. Throws SyntaxError. */
export function parseJsonLosslessly(text: string): unknown {
  let i = 0;
  const stack: Frame[] = [];
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at position ${i}`);
  };
  const skipWhitespace = () => {
    for (let c = text.charCodeAt(i); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = text.charCodeAt(++i));
  };
  const readString = (): string => {
    if (text[i] !== '"') fail('expected a string');
    const start = i++;
    for (;;) {
      const c = text.charCodeAt(i);
      if (Number.isNaN(c)) fail('unterminated string');
      if (c === 0x22) break;
      i += c === 0x5c ? 2 : 1;
    }
    i++;
    try {
      return JSON.parse(text.slice(start, i)) as string; // escapes and control characters, exactly as JSON.parse
    } catch {
      return fail('invalid string');
    }
  };
  const readKey = (frame: { key: string }) => {
    skipWhitespace();
    frame.key = readString();
    skipWhitespace();
    if (text[i] !== ':') fail("expected ':'");
    i++;
  };
  const readScalar = (): unknown => {
    for (const [token, value] of LITERALS) {
      if (text.startsWith(token, i)) {
        i += token.length;
        return value;
      }
    }
    if (text[i] === '"') return readString();
    NUMBER.lastIndex = i;
    const match = NUMBER.exec(text);
    if (!match) return fail('unexpected character');
    i += match[0].length;
    const value = Number(match[0]);
    const integer = match[1] === undefined && match[2] === undefined;
    return integer && !Number.isSafeInteger(value) ? BigInt(match[0]) : value;
  };

  for (;;) {
    skipWhitespace();
    let value: unknown;
    const c = text[i];
    if (c === '{' || c === '[') {
      i++;
      skipWhitespace();
      if (text[i] === (c === '{' ? '}' : ']')) {
        i++;
        value = c === '{' ? {} : [];
      } else if (c === '{') {
        const frame = { object: {}, key: '' };
        stack.push(frame);
        readKey(frame);
        continue;
      } else {
        stack.push({ array: [] });
        continue;
      }
    } else {
      value = readScalar();
    }
    // Hand the value to its container; close every container that ends here.
    for (;;) {
      const top = stack[stack.length - 1];
      if (!top) {
        skipWhitespace();
        if (i < text.length) fail('unexpected text after the JSON value');
        return value;
      }
      if ('array' in top) top.array.push(value);
      else Object.defineProperty(top.object, top.key, { value, enumerable: true, writable: true, configurable: true });
      skipWhitespace();
      const closer = 'array' in top ? ']' : '}';
      if (text[i] === ',') {
        i++;
        if ('object' in top) readKey(top);
        break;
      }
      if (text[i] !== closer) fail(`expected ',' or '${closer}'`);
      i++;
      stack.pop();
      value = 'array' in top ? top.array : top.object;
    }
  }
}
