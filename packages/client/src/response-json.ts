/**
 * Response JSON as Triton writes it: FP outputs may hold the bare tokens NaN, Infinity and
 * -Infinity, and INT64/UINT64 outputs integers beyond 2^53, neither of which JSON.parse keeps.
 * Such tokens outside string literals are quoted before parsing; outputFromJson turns the
 * strings back into numbers (Number) or bigints (BigInt) exactly. Plain responses take
 * JSON.parse alone.
 */
export function parseResponseJson(text: string): unknown {
  if (!LONG_INTEGER.test(text)) {
    try {
      return JSON.parse(text);
    } catch (error) {
      if (!NON_FINITE.test(text)) throw error;
    }
  }
  return JSON.parse(text.replace(STRING_OR_SPECIAL_NUMBER, (match) => (match.startsWith('"') ? match : `"${match}"`)));
}

const LONG_INTEGER = /(?<![\d.eE+-])-?\d{16,}(?![\d.eE])/;
const NON_FINITE = /NaN|Infinity/;
const STRING_OR_SPECIAL_NUMBER = /"(?:[^"\\]|\\.)*"|-?Infinity|NaN|(?<![\d.eE+-])-?\d{16,}(?![\d.eE])/g;
