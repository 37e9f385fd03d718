/**
 * The `image_preprocess` example model: image BYTES [n, 1] (PNG or JPEG files) -> pixels FP32
 * [n, 3, height, width], the size read from the config's output dims. `pnpm examples` bundles
 * this file and its npm dependencies into image_preprocess/1/model.mjs. A file that does not
 * decode fails its own request with 400; the rest of the batch is served.
 */
import { ModelError, tensor, type InitializeArgs, type JsModel, type ModelRequest, type ModelResponse } from '@batchwise/backend';
import { ImageDecodeError } from './decode.ts';
import { preprocessImage } from './preprocess.ts';

interface OutputConfig {
  readonly name: string;
  readonly dims: readonly (number | string)[];
}

export default class ImagePreprocess implements JsModel {
  private width = 0;
  private height = 0;

  initialize(args: InitializeArgs): void {
    const output = (args.config['output'] as OutputConfig[]).find((o) => o.name === 'pixels');
    const dims = output?.dims.map(Number) ?? [];
    if (dims.length !== 3 || dims[0] !== 3 || !(dims[1] > 0) || !(dims[2] > 0)) {
      throw new Error(`output 'pixels' must have dims [3, height, width], got [${dims.join(', ')}]`);
    }
    [, this.height, this.width] = dims;
  }

  execute(requests: readonly ModelRequest[]): (ModelResponse | Error)[] {
    return requests.map((request) => this.preprocess(request));
  }

  private preprocess(request: ModelRequest): ModelResponse | Error {
    const images = request.inputs['image'].data as Buffer[];
    const size = 3 * this.height * this.width;
    const pixels = new Float32Array(images.length * size);
    for (const [i, bytes] of images.entries()) {
      try {
        pixels.set(preprocessImage(bytes, this.width, this.height), i * size);
      } catch (err) {
        if (err instanceof ImageDecodeError) return new ModelError(`image ${i}: ${err.message}`, 'INVALID_ARG');
        throw err;
      }
    }
    return { outputs: [tensor('pixels', 'FP32', [images.length, 3, this.height, this.width], pixels)] };
  }
}
