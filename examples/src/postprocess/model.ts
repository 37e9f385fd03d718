/**
 * The `postprocess` and `image_postprocess` example models (one source, bundled into both model
 * folders by `pnpm examples`): logits FP32 [n, classes] -> the top-k labels BYTES [n, k] and
 * their softmax scores FP32 [n, k]. Labels come from the file named by the `labels_file`
 * parameter (default labels.txt) in the model folder, k from `top_k` (default 1).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ModelError, tensor, type InitializeArgs, type JsModel, type ModelRequest, type ModelResponse } from '@batchwise/backend';
import { positiveIntegerParameter, stringParameter } from '../config-parameters.ts';
import { parseLabels, softmax, topK } from './top-k.ts';

export default class TopKLabels implements JsModel {
  private labels: readonly string[] = [];
  private k = 1;

  async initialize(args: InitializeArgs): Promise<void> {
    const file = stringParameter(args.config, 'labels_file') ?? 'labels.txt';
    this.labels = parseLabels(await readFile(join(args.modelDir, file), 'utf8'));
    if (this.labels.length === 0) throw new Error(`${file} has no labels`);
    this.k = Math.min(positiveIntegerParameter(args.config, 'top_k', 1), this.labels.length);
  }

  execute(requests: readonly ModelRequest[]): (ModelResponse | Error)[] {
    return requests.map((request) => this.rank(request));
  }

  private rank(request: ModelRequest): ModelResponse | Error {
    const logits = request.inputs['logits'];
    const [rows, classes] = logits.shape;
    if (logits.shape.length !== 2 || classes !== this.labels.length) {
      return new ModelError(
        `logits must have shape [n, ${this.labels.length}] (one per label), got [${logits.shape.join(', ')}]`,
        'INVALID_ARG',
      );
    }
    const data = logits.data as Float32Array;
    const labels: string[] = [];
    const scores = new Float32Array(rows * this.k);
    for (let row = 0; row < rows; row++) {
      const ranked = topK(softmax(data.subarray(row * classes, (row + 1) * classes)), this.k);
      ranked.forEach(({ index, score }, i) => {
        labels.push(this.labels[index]);
        scores[row * this.k + i] = score;
      });
    }
    return {
      outputs: [tensor('labels', 'BYTES', [rows, this.k], labels), tensor('scores', 'FP32', [rows, this.k], scores)],
    };
  }
}
