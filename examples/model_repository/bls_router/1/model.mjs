/**
 * Model selection with in-server calls (Triton's BLS): each request goes to version 1 of the
 * `model` parameter's model (scaler) when its largest magnitude is at most `threshold`, and to
 * version 2 otherwise. The call is queued and batched by that model's own scheduler like any
 * request. Returns the called model's OUTPUT0 and, per row, the version that answered.
 * INPUT0 FP32 [n, k] -> OUTPUT0 FP32 [n, k], VERSION BYTES [n, 1].
 */
import { inferModel, tensor } from '@batchwise/backend';

export default class BlsRouter {
  model = 'scaler';
  threshold = 100;

  /** @param {import('@batchwise/backend').InitializeArgs} args */
  initialize({ config }) {
    const parameters = /** @type {Record<string, { string_value?: string }> | undefined} */ (config.parameters);
    this.model = parameters?.model?.string_value ?? this.model;
    this.threshold = Number(parameters?.threshold?.string_value ?? this.threshold);
    if (Number.isNaN(this.threshold)) throw new Error(`parameter threshold must be a number, got '${parameters?.threshold?.string_value}'`);
  }

  /** @param {readonly import('@batchwise/backend').ModelRequest[]} requests */
  execute(requests) {
    return Promise.all(requests.map((request) => this.route(request)));
  }

  /** @param {import('@batchwise/backend').ModelRequest} request */
  async route(request) {
    const input = request.inputs.INPUT0;
    const values = /** @type {Float32Array} */ (input.data);
    const largest = values.reduce((max, v) => Math.max(max, Math.abs(v)), 0);
    const version = largest <= this.threshold ? '1' : '2';
    try {
      const result = await inferModel({
        model: this.model,
        version,
        inputs: [tensor('INPUT0', 'FP32', input.shape, values)],
        outputs: ['OUTPUT0'],
      });
      const output = result.output('OUTPUT0');
      const rows = input.shape[0];
      return { outputs: [output, tensor('VERSION', 'BYTES', [rows, 1], Array(rows).fill(result.version))] };
    } catch (err) {
      // A failed call (the model unloaded, bad input) fails this request alone, with the server's code.
      return /** @type {Error} */ (err);
    }
  }
}
