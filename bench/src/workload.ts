import { link, mkdir, rm, stat, writeFile, copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GrpcClient, HttpClient, type InferenceClient } from '@batchwise/client';
// Not the package's index, which brings esbuild: the GPU check bundles this file (bench/gpu-check).
import { writeModel, type IModelProto } from '@batchwise/modelgen/graph-builder';
import type { SendRequest } from '@batchwise/client/load';
import { encodeFp32InferRequest, rawGrpcInfer } from './raw-grpc.ts';

export const CACHE_DIR = new URL('../.cache/', import.meta.url).pathname;

/** Generates a model into the cache once (large models are never committed). */
export async function cachedModel(name: string, build: () => IModelProto, log: (l: string) => void): Promise<string> {
  const path = join(CACHE_DIR, 'models', `${name}.onnx`);
  const exists = await stat(path).then(
    () => true,
    () => false,
  );
  if (!exists) {
    log(`generating ${name} ...`);
    const bytes = await writeModel(path, build());
    log(`generated ${name}: ${(bytes / 1e6).toFixed(1)} MB`);
  }
  return path;
}

/** A model of the repository: an ONNX file (`modelFile`), the source of a JavaScript model (`modelMjs`) or of a Python one (`modelPy`). */
export type RepositoryEntry = { readonly name: string; readonly config: string } & (
  { readonly modelFile: string } | { readonly modelMjs: string } | { readonly modelPy: string }
);

/** A Triton-layout repository in the cache; model files are hard links, not copies. */
export async function benchRepository(scenario: string, entries: readonly RepositoryEntry[]): Promise<string> {
  const dir = join(CACHE_DIR, 'repos', scenario);
  await rm(dir, { recursive: true, force: true });
  for (const entry of entries) await addModel(dir, entry);
  return dir;
}

/** Writes one model's folder (version 1) into the repository `dir`. */
export async function addModel(dir: string, entry: RepositoryEntry): Promise<void> {
  await mkdir(join(dir, entry.name, '1'), { recursive: true });
  await writeFile(join(dir, entry.name, 'config.pbtxt'), entry.config);
  if ('modelMjs' in entry) {
    await writeFile(join(dir, entry.name, '1', 'model.mjs'), entry.modelMjs);
    return;
  }
  if ('modelPy' in entry) {
    await writeFile(join(dir, entry.name, '1', 'model.py'), entry.modelPy);
    return;
  }
  const target = join(dir, entry.name, '1', 'model.onnx');
  await link(entry.modelFile, target).catch(() => copyFile(entry.modelFile, target));
}

/** A JavaScript model (`backend: "js"`) that answers each request with its INPUT0 as OUTPUT0: the backend's own cost. */
export const JS_IDENTITY = `import { tensor } from '@batchwise/backend';
export default {
  execute(requests) {
    return requests.map((r) => ({ outputs: [tensor('OUTPUT0', r.inputs.INPUT0.datatype, r.inputs.INPUT0.shape, r.inputs.INPUT0.data)] }));
  },
};
`;

/**
 * A one-input FP32 config (INPUT0 -> OUTPUT0, `width` floats a row, `instances` (1) instances: KIND_CPU unless
 * `kind` says). Batching on without `delayUs` is `dynamic_batching { }`, the server's default delay; `parameters`
 * are written as string parameters; `backend: "js"` for a JavaScript model, `"python"` for a Python one.
 */
export function fp32Config(
  name: string,
  options: {
    width: number;
    maxBatchSize: number;
    batching: boolean;
    delayUs?: number;
    threads?: number;
    parameters?: Readonly<Record<string, string>>;
    backend?: 'js' | 'python';
    /** @default 1 */
    instances?: number;
    /** @default 'KIND_CPU' */
    kind?: 'KIND_CPU' | 'KIND_GPU';
    /** A gpu_execution_accelerator by name (`webgpu`), as Triton's optimization block names one. */
    gpuAccelerator?: string;
    /** That accelerator's parameters. */
    gpuAcceleratorParameters?: Readonly<Record<string, string>>;
  },
): string {
  return [
    `name: "${name}"`,
    ...(options.backend ? [`backend: "${options.backend}"`] : []),
    `max_batch_size: ${options.maxBatchSize}`,
    `input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${options.width} ] } ]`,
    `output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${options.width} ] } ]`,
    `instance_group [ { kind: ${options.kind ?? 'KIND_CPU'} count: ${options.instances ?? 1} } ]`,
    ...(options.gpuAccelerator
      ? [
          `optimization { execution_accelerators { gpu_execution_accelerator [ { name: "${options.gpuAccelerator}"${Object.entries(
            options.gpuAcceleratorParameters ?? {},
          )
            .map(([key, value]) => ` parameters { key: "${key}" value: "${value}" }`)
            .join('')} } ] } }`,
        ]
      : []),
    // Batching is on by default in Batchwise: "off" has to be asked for.
    options.batching
      ? `dynamic_batching { ${options.delayUs === undefined ? '' : `max_queue_delay_microseconds: ${options.delayUs} `}}`
      : 'parameters { key: "batchwise_dynamic_batching" value: { string_value: "false" } }',
    options.threads ? `parameters { key: "intra_op_thread_count" value: { string_value: "${options.threads}" } }` : '',
    ...Object.entries(options.parameters ?? {}).map(([key, value]) => `parameters { key: "${key}" value: { string_value: "${value}" } }`),
  ].join('\n');
}

/**
 * `grpc` is @batchwise/client's grpc-js client, as users call the server; `grpc-raw` sends a
 * pre-encoded ModelInfer over node:http2 (raw-grpc.ts), like perf_analyzer's lean C++ client.
 */
export type Protocol = 'http-binary' | 'http-json' | 'grpc' | 'grpc-raw';
export const PROTOCOLS: readonly Protocol[] = ['http-binary', 'http-json', 'grpc', 'grpc-raw'];

export interface Target {
  readonly httpUrl: string;
  readonly grpcAddress: string;
}

/** @batchwise/client of the protocol, with a connection per concurrent caller (gRPC: up to 4). */
export function inferClient(target: Target, protocol: 'http-binary' | 'http-json' | 'grpc', connections: number): InferenceClient {
  return protocol === 'grpc'
    ? // Up to 4 HTTP/2 connections: past that grpc-js gains nothing on these cores (bench/README.md).
      new GrpcClient({ url: target.grpcAddress, channels: Math.min(4, connections) })
    : new HttpClient({ url: target.httpUrl, connections });
}

/** A request that sends one sample of `width` floats over the protocol, and how to close its connections. */
export function inferRequest(
  target: Target,
  protocol: Protocol,
  model: string,
  width: number,
  connections: number,
): { send: SendRequest; close(): Promise<void> } {
  const data = Float32Array.from({ length: width }, (_, i) => (i % 13) / 13);
  if (protocol === 'grpc-raw')
    return rawGrpcInfer(target.grpcAddress, encodeFp32InferRequest(model, width, data), Math.min(4, connections));
  const client = inferClient(target, protocol, connections);
  const binary = protocol !== 'http-json';
  const send: SendRequest = async () => {
    await client.infer({
      model,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, width], data }],
      ...(protocol !== 'grpc' && { binary }),
    });
  };
  return { send, close: () => client.close() };
}
