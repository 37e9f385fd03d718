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
 * Counts the values that sit in the arrays of a JSON text, what JSON.parse makes a slot and an
 * object of per element, from its bytes: one pass following strings (and their escapes) and the
 * nesting of arrays and objects, fed in pieces as a body arrives (a token may span two pieces).
 * The counts are exact for valid JSON; invalid JSON fails JSON.parse anyway, having created at
 * most as much. A few nanoseconds per byte.
 */
export class JsonArrayCounter {
  /** Bytes fed so far. */
  bytes = 0;
  private readonly enclosing: boolean[] = [];
  private inArray = false;
  /** At a value's place in an array: after '[' or ','. */
  private expecting = false;
  /** Inside a string (counted or not), after a backslash in one, or inside a number or literal. */
  private inString = false;
  private escaped = false;
  private inScalar = false;
  private stringCounted = false;
  private values = 0;
  private strings = 0;
  private stringBytes = 0;
  private containers = 0;
  private high = 0;

  get census(): JsonArrayCensus {
    return {
      values: this.values,
      strings: this.strings,
      stringBytes: this.stringBytes,
      containers: this.containers,
      nonAscii: this.high >= 0x80,
    };
  }

  write(json: Uint8Array): this {
    const n = json.length;
    this.bytes += n;
    let i = 0;
    if (this.inString) i = this.skipString(json, 0) + 1;
    else if (this.inScalar) i = this.skipScalar(json, 0) + 1;
    for (; i < n; i++) {
      const c = json[i]!;
      switch (CLASS[c]) {
        case STRING:
          this.inString = true;
          this.stringCounted = this.inArray && this.expecting;
          if (this.stringCounted) {
            this.values++;
            this.strings++;
            this.expecting = false;
          }
          i = this.skipString(json, i + 1);
          break;
        case OPEN_ARRAY:
        case OPEN_OBJECT:
          if (this.inArray && this.expecting) this.containers++;
          this.enclosing.push(this.inArray);
          this.inArray = c === 0x5b;
          this.expecting = this.inArray;
          break;
        case CLOSE:
          this.inArray = this.enclosing.pop() ?? false;
          this.expecting = false;
          break;
        case COMMA:
          this.expecting = this.inArray;
          break;
        case BETWEEN:
          break;
        default:
          // A number or literal: counted once, its bytes skipped.
          if (this.inArray && this.expecting) {
            this.values++;
            this.expecting = false;
          }
          this.inScalar = true;
          i = this.skipScalar(json, i);
      }
    }
    return this;
  }

  /** From inside a string to its closing quote; returns that quote's index (or the end of the piece). */
  private skipString(json: Uint8Array, from: number): number {
    const n = json.length;
    let i = from;
    if (this.escaped && i < n) {
      this.escaped = false;
      i++;
    }
    let high = 0;
    for (; i < n; i++) {
      const s = json[i]!;
      if (s === QUOTE) break;
      high |= s;
      if (s === BACKSLASH) {
        if (i + 1 === n) this.escaped = true;
        i++;
      }
    }
    this.high |= high;
    if (this.stringCounted) this.stringBytes += Math.min(i, n) - from;
    if (i < n) this.inString = false;
    return i;
  }

  /** Over the bytes of a number or literal; returns the index of its last byte in the piece. */
  private skipScalar(json: Uint8Array, from: number): number {
    const n = json.length;
    let i = from;
    let high = 0;
    while (i < n && CLASS[json[i]!] === SCALAR) high |= json[i++]!;
    this.high |= high;
    if (i < n) this.inScalar = false;
    return i - 1;
  }
}

/** The census of a whole JSON text at once. */
export function countJsonArrays(json: Uint8Array): JsonArrayCensus {
  return new JsonArrayCounter().write(json).census;
}
