import { CONFIG_TYPE_TO_DATATYPE, TYPED_ARRAY_OF } from '@batchwise/protocol';
import type { InferInput } from '@batchwise/client';
import type { ModelConfig } from '../../config/model-config.ts';

/**
 * One request's inputs for the model as its config declares them: batch 1 when the model
 * batches, variable dimensions (-1) as 1, every required input (optional ones left out).
 * Numbers are small and varied rather than zeros, so no kernel takes a shortcut on them.
 */
export function requestInputs(config: ModelConfig): InferInput[] {
  return config.input
    .filter((input) => !input.optional)
    .map((input) => {
      const datatype = CONFIG_TYPE_TO_DATATYPE[input.data_type];
      if (!datatype)
        throw new Error(`input '${input.name}' of '${config.name}' has data_type ${input.data_type}, which tune cannot generate`);
      const dims = input.dims.map((d) => (d < 0 ? 1 : d));
      const shape = config.max_batch_size > 0 ? [1, ...dims] : dims;
      const count = dims.reduce((a, b) => a * b, 1);
      if (datatype === 'BYTES') return { name: input.name, datatype, shape, data: Array.from({ length: count }, (_, i) => `tune ${i}`) };
      if (datatype === 'BOOL') return { name: input.name, datatype, shape, data: Array.from({ length: count }, (_, i) => i % 2 === 0) };
      const array = new TYPED_ARRAY_OF[datatype](count);
      for (let i = 0; i < count; i++)
        array[i] = (array instanceof BigInt64Array || array instanceof BigUint64Array ? BigInt(i % 7) : i % 7) as never;
      return { name: input.name, datatype, shape, data: array };
    });
}
