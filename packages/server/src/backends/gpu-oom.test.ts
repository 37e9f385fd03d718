import { describe, expect, it } from 'vitest';
import { isGpuOutOfMemory } from './gpu-oom.ts';

describe('GPU out-of-memory recognition', () => {
  it.each([
    "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running Conv node. Name:'conv1' Status Message: /onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:376 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, onnxruntime::WaitNotificationFn) Failed to allocate memory for requested buffer of size 1073741824 (Cuda)",
    'CUDA failure 2: out of memory ; GPU=0 ; hostname=ip-10-0-1-2 ; file=cuda_allocator.cc ; line=47 ; expr=cudaMalloc((void**)&p, size);',
    'CUDNN failure 4: CUDNN_STATUS_ALLOC_FAILED ; GPU=0',
    'CUBLAS failure 3: CUBLAS_STATUS_ALLOC_FAILED',
  ])('recognises %s', (message) => {
    expect(isGpuOutOfMemory(message)).toBe(true);
  });

  it.each([
    'Got invalid dimensions for input: INPUT0 for the following indices index: 1 Got: 5 Expected: 4',
    'Failed to allocate memory for requested buffer of size 100 (Cpu)',
    "model instance of 'm' crashed (exited with code 1)",
  ])('does not mistake %s', (message) => {
    expect(isGpuOutOfMemory(message)).toBe(false);
  });
});
