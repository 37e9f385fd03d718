import { Errors } from '../errors/errors.ts';
import type { InferenceRequest, InferenceResponse, ResponseOutput } from '../protocol/types.ts';
import { expectedByteSize } from '../tensor/byte-size.ts';
import { formatShape } from '../tensor/shape.ts';
import type { DataType } from '../tensor/datatype.ts';
import type { Parameters } from '../tensor/tensor.ts';
import { describeValue } from '../tensor/describe-value.ts';
import type { RegionLease, SharedMemoryRef, SystemSharedMemory } from './system-shared-memory.ts';

/**
 * The shared memory parameters of an input or output (`shared_memory_region`,
 * `shared_memory_byte_size`, optional `shared_memory_offset`), as both protocols carry them.
 * `what` names the tensor in errors, e.g. "input 'INPUT0'".
 */
export function sharedMemoryRefOf(parameters: Parameters, what: string): SharedMemoryRef | undefined {
  const region = parameters['shared_memory_region'];
  const byteSize = parameters['shared_memory_byte_size'];
  const offset = parameters['shared_memory_offset'];
  if (region === undefined) {
    if (byteSize !== undefined || offset !== undefined) {
      throw Errors.invalidArg(`${what} has shared_memory_byte_size or shared_memory_offset but no shared_memory_region`);
    }
    return undefined;
  }
  if (typeof region !== 'string' || region === '') {
    throw Errors.invalidArg(`${what}: shared_memory_region must be a non-empty string, got ${describeValue(region)}`);
  }
  if (byteSize === undefined) throw Errors.invalidArg(`${what}: shared_memory_region '${region}' needs shared_memory_byte_size`);
  return {
    region,
    byteSize: nonNegativeInteger(byteSize, 'shared_memory_byte_size', what),
    offset: offset === undefined ? 0 : nonNegativeInteger(offset, 'shared_memory_offset', what),
  };
}

/** As sharedMemoryRefOf, and for fixed-size datatypes the byte size must be what the shape needs. */
export function inputSharedMemoryRefOf(
  name: string,
  datatype: DataType,
  shape: readonly number[],
  parameters: Parameters,
): SharedMemoryRef | undefined {
  const ref = sharedMemoryRefOf(parameters, `input '${name}'`);
  if (ref && datatype !== 'BYTES') {
    const expected = expectedByteSize(datatype, shape, name);
    if (ref.byteSize !== expected) {
      throw Errors.invalidArg(
        `input '${name}' has shared_memory_byte_size ${ref.byteSize}, but shape ${formatShape(shape)} of ${datatype} needs ${expected} bytes`,
      );
    }
  }
  return ref;
}

function nonNegativeInteger(value: unknown, field: string, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw Errors.invalidArg(`${what}: ${field} must be a non-negative integer, got ${describeValue(value)}`);
  }
  return value;
}

/**
 * The regions one request reads inputs from and writes outputs to, held from admission to
 * reply so that an unregister meanwhile cannot pull them away. Checked before the request
 * is queued: a missing region or an out-of-range slice fails it at once.
 */
export class RequestSharedMemory {
  private constructor(
    private readonly inputs: ReadonlyMap<string, RegionLease>,
    private readonly outputs: ReadonlyMap<string, { lease: RegionLease; ref: SharedMemoryRef }>,
  ) {}

  /** undefined when the request names no shared memory (the common case costs one scan). */
  static lease(request: InferenceRequest, shm: SystemSharedMemory): RequestSharedMemory | undefined {
    if (!request.inputs.some((i) => i.sharedMemory) && !request.outputs?.some((o) => o.sharedMemory)) return undefined;
    const leases: RegionLease[] = [];
    try {
      const inputs = new Map<string, RegionLease>();
      for (const input of request.inputs) {
        if (!input.sharedMemory) continue;
        const lease = shm.lease(input.sharedMemory, `input '${input.name}'`);
        leases.push(lease);
        inputs.set(input.name, lease);
      }
      const outputs = new Map<string, { lease: RegionLease; ref: SharedMemoryRef }>();
      for (const output of request.outputs ?? []) {
        if (!output.sharedMemory) continue;
        const lease = shm.lease(output.sharedMemory, `output '${output.name}'`);
        leases.push(lease);
        outputs.set(output.name, { lease, ref: output.sharedMemory });
      }
      return new RequestSharedMemory(inputs, outputs);
    } catch (error) {
      for (const lease of leases) lease.release();
      throw error;
    }
  }

  /** The request with each shared memory input's bytes read in. */
  async readInputs(request: InferenceRequest): Promise<InferenceRequest> {
    const inputs = await Promise.all(
      request.inputs.map(async (input) => {
        const lease = this.inputs.get(input.name);
        return lease ? { ...input, data: await lease.read() } : input;
      }),
    );
    return { ...request, inputs };
  }

  /** Writes each output asked for in shared memory into its region and marks it so frontends send no data for it. */
  async writeOutputs(response: InferenceResponse): Promise<InferenceResponse> {
    const outputs = await Promise.all(
      response.outputs.map(async (output): Promise<ResponseOutput> => {
        const target = this.outputs.get(output.name);
        if (!target) return output;
        await target.lease.write(output.data);
        return { ...output, sharedMemory: target.ref };
      }),
    );
    return { ...response, outputs };
  }

  release(): void {
    for (const lease of this.inputs.values()) lease.release();
    for (const { lease } of this.outputs.values()) lease.release();
  }
}
