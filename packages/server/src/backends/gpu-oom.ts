/**
 * Recognises a CUDA out-of-memory failure in an ONNX Runtime error message. Such a failure
 * does not kill the container (unlike a host OOM): it fails the batch, so it is counted on its
 * own and never retried in a loop.
 */
const GPU_OOM_PATTERNS = [
  /CUDA (error|failure) 2\b/i,
  /cudaErrorMemoryAllocation/i,
  /CUDA_ERROR_OUT_OF_MEMORY/i,
  /CUBLAS_STATUS_ALLOC_FAILED/i,
  /CUDNN_STATUS_ALLOC_FAILED/i,
  /out of memory.*(cuda|gpu)|(cuda|gpu).*out of memory/i,
  /Failed to allocate memory for requested buffer of size \d+.*(Cuda|GPU)/i,
  /BFCArena.*(Cuda|GPU).*Available memory/i,
];

export function isGpuOutOfMemory(message: string): boolean {
  return GPU_OOM_PATTERNS.some((p) => p.test(message));
}

export class GpuOutOfMemoryError extends Error {
  override readonly name = 'GpuOutOfMemoryError';
}
