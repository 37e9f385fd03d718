/**
 * BERT's WordPiece tokenizer (the uncased models' BasicTokenizer + WordpieceTokenizer), as a pure
 * module: no I/O, no server imports, so tests call it directly.
 *
 * Basic step: drop NUL, U+FFFD and control characters, turn whitespace into spaces, put spaces
 * around CJK ideographs, lowercase and strip accents, split on whitespace and on every punctuation
 * character. WordPiece step: each word becomes the longest vocabulary entries that match from its
 * start, continuations prefixed with `##`; a word that cannot be covered (or is longer than 100
 * characters) becomes `[UNK]` as a whole.
 */

export const PAD = '[PAD]';
export const UNK = '[UNK]';
export const CLS = '[CLS]';
export const SEP = '[SEP]';
const MAX_CHARS_PER_WORD = 100;

/**
 * vocab.txt: one token per line, its id the line number from 0.
 * @param {string} text
 * @returns {Map<string, number>}
 */
export function parseVocabulary(text) {
  const vocabulary = new Map();
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (const [id, line] of lines.entries()) {
    const token = line.replace(/\r$/, '');
    if (!vocabulary.has(token)) vocabulary.set(token, id);
  }
  for (const special of [PAD, UNK, CLS, SEP]) {
    if (!vocabulary.has(special)) throw new Error(`vocabulary has no ${special} token`);
  }
  return vocabulary;
}

/** @param {string} ch */
const isWhitespace = (ch) => ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r' || /\p{Zs}/u.test(ch);
/** @param {string} ch */
const isControl = (ch) => ch !== '\t' && ch !== '\n' && ch !== '\r' && /\p{C}/u.test(ch);
/**
 * BERT counts every non-alphanumeric ASCII character as punctuation (`$`, `^`, `` ` ``...), and
 * Unicode's P categories.
 * @param {string} ch
 */
function isPunctuation(ch) {
  const cp = ch.codePointAt(0) ?? 0;
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) return true;
  return /\p{P}/u.test(ch);
}
/** @param {number} cp */
function isCjk(cp) {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b820 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}

/**
 * The basic step: words and punctuation marks, lowercased and without accents.
 * @param {string} text
 * @returns {string[]}
 */
export function basicTokenize(text) {
  let cleaned = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    if (cp === 0 || cp === 0xfffd || isControl(ch)) continue;
    if (isWhitespace(ch)) cleaned += ' ';
    else if (isCjk(cp)) cleaned += ` ${ch} `;
    else cleaned += ch;
  }
  const words = [];
  for (const token of cleaned.split(' ')) {
    if (token === '') continue;
    const plain = token
      .toLowerCase()
      .normalize('NFD')
      .replace(/\p{Mn}/gu, '');
    let word = '';
    for (const ch of plain) {
      if (isPunctuation(ch)) {
        if (word !== '') words.push(word);
        words.push(ch);
        word = '';
      } else {
        word += ch;
      }
    }
    if (word !== '') words.push(word);
  }
  return words;
}

/**
 * Greedy longest-match-first split of one word into vocabulary entries.
 * @param {string} word
 * @param {ReadonlyMap<string, number>} vocabulary
 * @returns {string[]}
 */
export function wordPieces(word, vocabulary) {
  const chars = Array.from(word);
  if (chars.length > MAX_CHARS_PER_WORD) return [UNK];
  const pieces = [];
  for (let start = 0; start < chars.length;) {
    let end = chars.length;
    let piece = '';
    for (; end > start; end--) {
      const candidate = (start > 0 ? '##' : '') + chars.slice(start, end).join('');
      if (vocabulary.has(candidate)) {
        piece = candidate;
        break;
      }
    }
    if (piece === '') return [UNK];
    pieces.push(piece);
    start = end;
  }
  return pieces;
}

/**
 * @param {string} text
 * @param {ReadonlyMap<string, number>} vocabulary
 * @returns {string[]}
 */
export function tokenize(text, vocabulary) {
  return basicTokenize(text).flatMap((word) => wordPieces(word, vocabulary));
}

/**
 * `[CLS] tokens [SEP]`, the tokens cut so that the whole fits `maxLength`, then `[PAD]` up to
 * `maxLength`. The mask is 1 over the real tokens (the markers included) and 0 over the padding.
 * @param {string} text
 * @param {ReadonlyMap<string, number>} vocabulary
 * @param {number} maxLength at least 2
 * @returns {{ ids: number[], mask: number[] }}
 */
export function encode(text, vocabulary, maxLength) {
  if (!Number.isInteger(maxLength) || maxLength < 2) throw new Error(`maxLength must be an integer of at least 2, got ${maxLength}`);
  const idOf = (/** @type {string} */ token) => /** @type {number} */ (vocabulary.get(token) ?? vocabulary.get(UNK));
  const tokens = [CLS, ...tokenize(text, vocabulary).slice(0, maxLength - 2), SEP];
  const ids = tokens.map(idOf);
  const mask = ids.map(() => 1);
  while (ids.length < maxLength) {
    ids.push(idOf(PAD));
    mask.push(0);
  }
  return { ids, mask };
}
