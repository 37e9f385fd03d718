import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { GpuProviderName } from '../../config/execution-accelerators.ts';
import { glxDriverWithoutDisplay } from '../headless-vulkan.ts';
import { findSharedLibrary } from '../library-search.ts';
import { driverNames, vulkanMissing, vulkanSetup } from '../vulkan-detect.ts';

/** What the user can do instead, the same for every provider. */
const OTHERWISE = 'or set instance_group kind: KIND_CPU, or start with --allow-cpu-fallback to run it on the CPU knowingly';

/** Provider libraries onnxruntime-node loads from beside its binding (ONNXRUNTIME_NODE_INSTALL=cuda12 fetches them). */
const PROVIDER_LIBRARIES: Readonly<Record<'cuda' | 'tensorrt', readonly string[]>> = {
  cuda: ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'],
  tensorrt: ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_tensorrt.so'],
};

/** TensorRT 10's runtime, which ONNX Runtime's TensorRT provider loads; not in the CUDA image. */
const TENSORRT_LIBRARY = 'libnvinfer.so.10';

/**
 * The message a KIND_GPU model fails to load with when its execution provider cannot be created:
 * what was asked for, ONNX Runtime's reason, what is missing on this host, and what to do.
 */
export function gpuUnavailableMessage(provider: GpuProviderName, ortMessage: string): string {
  const reason = firstLine(ortMessage);
  switch (provider) {
    case 'cuda':
      return (
        `KIND_GPU requires the CUDA execution provider, which could not be used: ${withMissingLibraries('cuda', reason)}. ` +
        'Run on a host with an NVIDIA GPU and onnxruntime-node installed with its CUDA libraries ' +
        `(ONNXRUNTIME_NODE_INSTALL=cuda12), ${OTHERWISE}`
      );
    case 'tensorrt': {
      const tensorrt = findSharedLibrary(TENSORRT_LIBRARY) ? '' : `; TensorRT's ${TENSORRT_LIBRARY} is not on the library path`;
      return (
        `KIND_GPU with the tensorrt accelerator requires ONNX Runtime's TensorRT execution provider, which could not be used: ` +
        `${withMissingLibraries('tensorrt', reason)}${tensorrt}. Install TensorRT 10 for CUDA 12 beside onnxruntime-node's CUDA ` +
        `libraries, or remove the tensorrt accelerator to run on CUDA alone, ${OTHERWISE}`
      );
    }
    case 'webgpu': {
      const setup = vulkanSetup();
      const missing =
        vulkanMissing(setup) ??
        glxDriverWithoutDisplay() ??
        `Vulkan driver(s) ${driverNames(setup)} gave no adapter WebGPU supports (${reason})`;
      return (
        `KIND_GPU with the webgpu accelerator requires a Vulkan GPU adapter for ONNX Runtime's WebGPU execution provider: ${missing}. ` +
        `Run on a host with a GPU and its Vulkan driver (an NVIDIA driver brings one), ${OTHERWISE}`
      );
    }
  }
}

/**
 * ORT's exception says only "Failed to load shared library"; the library it could not open went
 * to its log. Name the provider libraries missing beside the binding, in words, instead.
 */
function withMissingLibraries(provider: 'cuda' | 'tensorrt', message: string): string {
  if (!/failed to load shared library/i.test(message)) return message;
  let bindingDir: string;
  try {
    const entry = createRequire(import.meta.url).resolve('onnxruntime-node');
    bindingDir = join(dirname(entry), '..', 'bin', 'napi-v6', process.platform, process.arch);
  } catch {
    return message;
  }
  const missing = PROVIDER_LIBRARIES[provider].filter((library) => !existsSync(join(bindingDir, library)));
  if (missing.length === 0) return message;
  return `${message} (onnxruntime-node was installed without its ${provider === 'cuda' ? 'CUDA' : 'TensorRT'} provider: ${bindingDir} has no ${missing.join(' or ')})`;
}

function firstLine(text: string): string {
  // ORT appends ANSI-coloured log lines to its messages; keep the readable part.
  const clean = text.replace(/\u001b\[[0-9;]*m/g, '');
  const libraryError = /Failed to load library [^\n]*/.exec(clean);
  const adapterError = /Failed to get a WebGPU adapter: [^\n]*/.exec(clean);
  return (libraryError?.[0] ?? adapterError?.[0] ?? clean.split('\n')[0] ?? clean).trim();
}
