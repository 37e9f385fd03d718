/** What JSON.parse will create in the arrays of a JSON text, counted from its bytes before it runs. */
export interface JsonArrayCensus {
  /** Scalars (numbers, strings, literals) directly in arrays: a body's tensor elements and shape dims. */
  readonly values: number;
  /** Of them, strings, and their bytes as written (escapes included, so at least their UTF-8 length). */
  readonly strings: number;
  readonly stringBytes: number;
  /** Arrays and objects in arrays (the rows of nested data). */
  readonly containers: number;
  /** A byte outside ASCII: the text then decodes to a two-byte string, twice its length. */
  readonly nonAscii: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

// What each byte is, outside strings; 0: part of a number or literal.
const SCALAR = 0;
const STRING = 1;
const OPEN_ARRAY = 2;
const OPEN_OBJECT = 3;
const CLOSE = 4;
const COMMA = 5;
const BETWEEN = 6;
const CLASS = new Uint8Array(256);
CLASS[QUOTE] = STRING;
CLASS[0x5b] = OPEN_ARRAY; // [
CLASS[0x7b] = OPEN_OBJECT; // {
CLASS[0x5d] = CLOSE; // ]
CLASS[0x7d] = CLOSE; // }
CLASS[0x2c] = COMMA; // ,
for (const c of [0x20, 0x0a, 0x0d, 0x09, 0x3a]) CLASS[c] = BETWEEN; // whitespace, ':'

/**
 * One pass over the bytes of a JSON text, following strings (and their escapes) and the nesting of
 * arrays and objects, counting the values that sit in arrays: what JSON.parse makes an object or
 * slot of per element. The counts are exact for valid JSON; invalid JSON fails JSON.parse anyway,
 * having created at most as much. A few nanoseconds per byte.
 */
export function countJsonArrays(json: Uint8Array): JsonArrayCensus {
  const enclosing: boolean[] = [];
  let inArray = false;
  /** At a value's place in an array: after '[' or ','. */
  let expecting = false;
  let values = 0;
  let strings = 0;
  let stringBytes = 0;
  let containers = 0;
  let high = 0;
  const n = json.length;
  for (let i = 0; i < n; i++) {
    const c = json[i]!;
    switch (CLASS[c]) {
      case STRING: {
        const start = i + 1;
        for (i = start; i < n; i++) {
          const s = json[i]!;
          if (s === QUOTE) break;
          if (s === BACKSLASH) i++;
          high |= s;
        }
        if (inArray && expecting) {
          values++;
          strings++;
          stringBytes += i - start;
          expecting = false;
        }
        break;
      }
      case OPEN_ARRAY:
      case OPEN_OBJECT:
        if (inArray && expecting) containers++;
        enclosing.push(inArray);
        inArray = c === 0x5b;
        expecting = inArray;
        break;
      case CLOSE:
        inArray = enclosing.pop() ?? false;
        expecting = false;
        break;
      case COMMA:
        expecting = inArray;
        break;
      case BETWEEN:
        break;
      default:
        // A number or literal: counted once, its bytes skipped.
        if (inArray && expecting) {
          values++;
          expecting = false;
        }
        high |= c;
        while (i + 1 < n && CLASS[json[i + 1]!] === SCALAR) high |= json[++i]!;
    }
  }
  return { values, strings, stringBytes, containers, nonAscii: high >= 0x80 };
}
