/**
 * The text_classification pipeline's first step, a JavaScript model written by hand with no
 * npm dependencies: text BYTES [n, 1] (UTF-8 strings) -> input_ids and attention_mask INT64
 * [n, max_sequence_length], BERT's WordPiece over vocab.txt beside this file (wordpiece.mjs).
 * max_sequence_length is a parameter of config.pbtxt (default 16).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tensor } from '@batchwise/backend';
import { encode, parseVocabulary } from './wordpiece.mjs';

export default class Tokenizer {
  /** @param {import('@batchwise/backend').InitializeArgs} args */
  async initialize({ config, versionDir }) {
    const parameters = /** @type {Record<string, { string_value?: string }> | undefined} */ (config.parameters);
    const length = Number(parameters?.max_sequence_length?.string_value ?? '16');
    if (!Number.isInteger(length) || length < 2)
      throw new Error(`parameter max_sequence_length must be an integer of at least 2, got '${length}'`);
    this.maxLength = length;
    this.vocabulary = parseVocabulary(await readFile(join(versionDir, 'vocab.txt'), 'utf8'));
  }

  /** @param {readonly import('@batchwise/backend').ModelRequest[]} requests */
  execute(requests) {
    return requests.map((request) => {
      const texts = /** @type {Buffer[]} */ (request.inputs.text.data);
      const length = /** @type {number} */ (this.maxLength);
      const ids = new BigInt64Array(texts.length * length);
      const mask = new BigInt64Array(texts.length * length);
      texts.forEach((text, row) => {
        const encoded = encode(text.toString('utf8'), /** @type {Map<string, number>} */ (this.vocabulary), length);
        ids.set(encoded.ids.map(BigInt), row * length);
        mask.set(encoded.mask.map(BigInt), row * length);
      });
      return {
        outputs: [
          tensor('input_ids', 'INT64', [texts.length, length], ids),
          tensor('attention_mask', 'INT64', [texts.length, length], mask),
        ],
      };
    });
  }
}
