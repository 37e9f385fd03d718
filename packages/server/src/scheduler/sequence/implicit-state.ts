import type { SequenceStateSpec } from '../../config/sequence-batching.ts';
import { InferenceServerError } from '../../errors/errors.ts';
import { expectedByteSize, type FixedSizeDataType } from '../../tensor/byte-size.ts';
import type { Tensor } from '../../tensor/tensor.ts';

/**
 * Triton's implicit state for one model version (sequence_batching.state): a sequence's state is one
 * tensor per state, named as the model's state input and shaped as the model sees it ([1, ...dims]
 * when the model batches). The state output of a request becomes the state input of the sequence's
 * next request; a START takes the initial state again: initial_state's zeros or data_file, or
 * without initial_state zeros with every variable dimension 1 (Triton leaves that first input
 * uninitialized; zeros are the same for a model that ignores it on START, and reproducible).
 */
export class ImplicitStates {
  private readonly initialTensors: readonly Tensor[];
  readonly outputNames: readonly string[];

  constructor(
    readonly specs: readonly SequenceStateSpec[],
    private readonly batching: boolean,
    model: string,
    files: ReadonlyMap<string, Uint8Array> = new Map(),
  ) {
    this.outputNames = specs.map((s) => s.outputName);
    this.initialTensors = specs.map((spec) => {
      const dims = spec.initial ? [...spec.initial.dims] : spec.dims.map((d) => (d === -1 ? 1 : d));
      const shape = batching ? [1, ...dims] : dims;
      const bytes = expectedByteSize(spec.datatype as FixedSizeDataType, shape, spec.inputName);
      if (!spec.initial || 'zero' in spec.initial)
        return { name: spec.inputName, datatype: spec.datatype, shape, data: new Uint8Array(bytes) };
      const file = files.get(spec.inputName);
      if (!file || file.byteLength < bytes) {
        throw new InferenceServerError(
          'INVALID_ARG',
          `model '${model}': initial_state setting expects ${bytes} bytes, but the data provided from ${spec.initial.dataFile} only has ${file?.byteLength ?? 0} bytes.`,
        );
      }
      return { name: spec.inputName, datatype: spec.datatype, shape, data: file.slice(0, bytes) };
    });
  }

  get any(): boolean {
    return this.specs.length > 0;
  }

  /** The state a sequence starts with (shared, never written: batches copy their inputs). */
  initial(): readonly Tensor[] {
    return this.initialTensors;
  }

  /** The bytes a state holds. */
  bytesOf(state: readonly Tensor[]): number {
    let bytes = 0;
    for (const tensor of state) bytes += tensor.data.byteLength;
    return bytes;
  }

  /** The new state from one request's outputs (its own rows), copied out of the batch's output buffers. */
  fromOutputs(outputs: ReadonlyMap<string, Tensor>, model: string): Tensor[] {
    return this.specs.map((spec) => {
      const output = outputs.get(spec.outputName);
      if (!output) throw new InferenceServerError('INTERNAL', `model '${model}' produced no state output '${spec.outputName}'`);
      return { name: spec.inputName, datatype: spec.datatype, shape: [...output.shape], data: output.data.slice() };
    });
  }

  /** A null request's state (Triton's dummy state): zeros shaped as `like`, so a slot without a request never touches a real state. */
  zerosLike(like: readonly Tensor[]): Tensor[] {
    return like.map((t) => ({ ...t, data: new Uint8Array(t.data.byteLength) }));
  }

  /** With batching, a state keeps its leading batch dimension of 1. */
  get batched(): boolean {
    return this.batching;
  }
}
