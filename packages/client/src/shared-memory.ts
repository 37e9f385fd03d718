import type { Parameters, SharedMemoryLocation } from './types.ts';

/** A shared memory location as Triton's tensor parameters, the same on both protocols. */
export function sharedMemoryParameters(location: SharedMemoryLocation): Parameters {
  return {
    shared_memory_region: location.region,
    shared_memory_byte_size: location.byteSize,
    ...(location.offset !== undefined && location.offset !== 0 && { shared_memory_offset: location.offset }),
  };
}
