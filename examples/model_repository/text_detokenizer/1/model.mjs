/**
 * text_detokenizer: the last step of the text_generation ensemble. Each token id the generator sent
 * becomes its character (vocabulary.json). The tokens of many streams arrive together: one execute()
 * answers them all.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ModelError, tensor } from '@batchwise/backend';

export default class TextDetokenizer {
  async initialize(args) {
    this.vocabulary = JSON.parse(await readFile(join(args.versionDir, 'vocabulary.json'), 'utf8'));
  }

  execute(requests) {
    return requests.map((request) => {
      const id = Number(request.inputs.output_ids.data[0]);
      const text = this.vocabulary[id];
      if (text === undefined) return new ModelError(`output_ids holds ${id}, which is not a token id`, 'INVALID_ARG');
      return { outputs: [tensor('text_output', 'BYTES', [1, 1], [text])] };
    });
  }
}
