/**
 * text_tokenizer: the first step of the text_generation ensemble. Each request's prompt (one string)
 * becomes its character ids (vocabulary.json; a character the model does not know reads as a space),
 * after two spaces: what the generator reads before any text, so a short prompt has a context too.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ModelError, tensor } from '@batchwise/backend';

export default class TextTokenizer {
  async initialize(args) {
    this.vocabulary = JSON.parse(await readFile(join(args.versionDir, 'vocabulary.json'), 'utf8'));
    this.space = this.vocabulary.indexOf(' ');
  }

  execute(requests) {
    return requests.map((request) => {
      const prompts = request.inputs.text_input.data;
      if (prompts.length !== 1) return new ModelError(`text_input must hold one prompt, got ${prompts.length}`, 'INVALID_ARG');
      const ids = [this.space, this.space, ...[...prompts[0].toString('utf8')].map((c) => this.idOf(c))];
      return { outputs: [tensor('input_ids', 'INT64', [1, ids.length], ids.map(BigInt))] };
    });
  }

  /** A character's id; one the model does not know reads as a space. */
  idOf(c) {
    const id = this.vocabulary.indexOf(c.toLowerCase());
    return id >= 0 ? id : this.space;
  }
}
