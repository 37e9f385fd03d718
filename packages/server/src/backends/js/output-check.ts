import type { ModelConfig } from '../../config/model-config.ts';
import { modelFacingDims } from '../../config/shape-rules.ts';
import { Errors, type InferenceServerError } from '../../errors/errors.ts';
import { countBytesElements } from '../../tensor/bytes-codec.ts';
import { CONFIG_TYPE_TO_DATATYPE, ELEMENT_BYTE_SIZE, type DataType } from '../../tensor/datatype.ts';
import type { Tensor } from '../../tensor/tensor.ts';

interface OutputSpec {
  readonly datatype: DataType;
  /** Model-facing dims (reshape applied), without the batch dimension; -1 is any. */
  readonly dims: readonly number[];
}

/** What one JavaScript model's outputs must look like, from its config. */
export class OutputRules {
  private readonly specs: ReadonlyMap<string, OutputSpec>;
  private readonly batching: boolean;

  constructor(
    private readonly modelName: string,
    config: ModelConfig,
  ) {
    this.batching = config.max_batch_size > 0;
    this.specs = new Map(config.output.map((o) => [o.name, { datatype: CONFIG_TYPE_TO_DATATYPE[o.data_type]!, dims: modelFacingDims(o) }]));
  }

  /**
   * The requested outputs, in the order asked, each checked against the config: a declared
   * name, its datatype, a shape its dims allow (batch dimension first, `batchSize` rows, when
   * the model batches) and as many elements as the shape holds. Throws (INTERNAL, naming the
   * model and the output) at the first that is not.
   */
  select(outputs: readonly Tensor[], requested: readonly string[], batchSize: number): Tensor[] {
    const byName = new Map<string, Tensor>();
    for (const output of outputs) {
      const spec = this.specs.get(output.name);
      if (!spec)
        throw this.error(
          `returned output '${output.name}', which its config does not declare (declared: ${[...this.specs.keys()].join(', ')})`,
        );
      this.check(output, spec, batchSize);
      byName.set(output.name, output);
    }
    return requested.map((name) => {
      const found = byName.get(name);
      if (!found) throw this.error(`returned no output '${name}', which the request asked for`);
      return found;
    });
  }

  private check(output: Tensor, spec: OutputSpec, batchSize: number): void {
    const what = `output '${output.name}'`;
    if (output.datatype !== spec.datatype) throw this.error(`${what} is ${output.datatype}, but its config declares ${spec.datatype}`);
    const expected = this.batching ? [batchSize, ...spec.dims] : spec.dims;
    const fits = output.shape.length === expected.length && output.shape.every((d, i) => expected[i] === -1 || expected[i] === d);
    if (!fits) {
      const note = this.batching ? ` (${batchSize} rows for this request, then the config dims)` : '';
      throw this.error(`${what} has shape [${output.shape.join(',')}], but its config allows [${expected.join(',')}]${note}`);
    }
    let count = 1;
    for (const d of output.shape) count *= d;
    const found =
      output.datatype === 'BYTES'
        ? countBytesElements(output.data, output.name)
        : output.data.byteLength / ELEMENT_BYTE_SIZE[output.datatype];
    if (found !== count) throw this.error(`${what} has ${found} elements, but its shape [${output.shape.join(',')}] holds ${count}`);
  }

  private error(message: string): InferenceServerError {
    return Errors.internal(`model '${this.modelName}' ${message}`);
  }
}
