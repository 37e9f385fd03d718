/** The tokenizer's WordPiece module against token ids worked out by hand from tokenizer/1/vocab.txt. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { basicTokenize, encode, parseVocabulary, tokenize, wordPieces } from '../model_repository/tokenizer/1/wordpiece.mjs';

const vocabulary = parseVocabulary(readFileSync(new URL('../model_repository/tokenizer/1/vocab.txt', import.meta.url), 'utf8'));
const PAD = (n: number) => Array<number>(n).fill(0);
const ONES = (n: number) => Array<number>(n).fill(1);

describe('WordPiece tokenizer', () => {
  it('reads the vocabulary with BERT special tokens, [PAD] at 0', () => {
    expect([vocabulary.get('[PAD]'), vocabulary.get('[UNK]'), vocabulary.get('[CLS]'), vocabulary.get('[SEP]')]).toEqual([0, 1, 2, 3]);
    expect(() => parseVocabulary('a\nb\n')).toThrow(/no \[PAD\]/);
  });

  it('encodes a plain sentence: [CLS] words [SEP], padded with [PAD] to the length', () => {
    // [CLS] i love this wonderful movie [SEP]
    expect(encode('I love this wonderful movie', vocabulary, 16)).toEqual({
      ids: [2, 40, 166, 57, 170, 125, 3, ...PAD(9)],
      mask: [...ONES(7), ...PAD(9)],
    });
  });

  it('splits punctuation off as tokens of its own', () => {
    expect(tokenize('a terrible, boring waste of time', vocabulary)).toEqual(['a', 'terrible', ',', 'boring', 'waste', 'of', 'time']);
    expect(encode('a terrible, boring waste of time', vocabulary, 12).ids).toEqual([2, 37, 188, 16, 190, 192, 80, 138, 3, 0, 0, 0]);
    expect(basicTokenize("it's $5...")).toEqual(['it', "'", 's', '$', '5', '.', '.', '.']);
  });

  it('splits words into the longest pieces first, continuations marked ##', () => {
    expect(tokenize('Movies played wonderfully!', vocabulary)).toEqual(['movie', '##s', 'play', '##ed', 'wonderful', '##ly', '!']);
    expect(encode('Movies played wonderfully!', vocabulary, 10).ids).toEqual([2, 125, 202, 165, 203, 170, 205, 5, 3, 0]);
    // "wonderful" is in the vocabulary whole, so it is not cut at "wonder".
    expect(wordPieces('wonderful', vocabulary)).toEqual(['wonderful']);
  });

  it('makes a word it cannot cover entirely [UNK], not a partial match', () => {
    expect(wordPieces('xylophone', vocabulary)).toEqual(['[UNK]']);
    expect(wordPieces('playz', vocabulary)).toEqual(['[UNK]']); // play + "##z" is not in the vocabulary
    expect(wordPieces('a'.repeat(101), vocabulary)).toEqual(['[UNK]']);
    // [CLS] the [UNK] was awful . [SEP]
    expect(encode('The xylophone was AWFUL.', vocabulary, 8).ids).toEqual([2, 39, 1, 63, 189, 18, 3, 0]);
  });

  it('lowercases, strips accents, drops control characters and isolates CJK ideographs', () => {
    expect(basicTokenize('Amazíng\tFILM\u0000 好movie')).toEqual(['amazing', 'film', '好', 'movie']);
    expect(tokenize('Amazíng 好movie', vocabulary)).toEqual(['amazing', '[UNK]', 'movie']);
  });

  it('truncates to the length, keeping [SEP] last', () => {
    // [CLS] i love this wonderful [SEP]: "movie" does not fit.
    expect(encode('I love this wonderful movie', vocabulary, 6)).toEqual({ ids: [2, 40, 166, 57, 170, 3], mask: ONES(6) });
    expect(encode('', vocabulary, 4)).toEqual({ ids: [2, 3, 0, 0], mask: [1, 1, 0, 0] });
    expect(() => encode('x', vocabulary, 1)).toThrow(/at least 2/);
  });
});
