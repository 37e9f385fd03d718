/** What a memory limit counts of a model instance beside its weights, for benchmarks that size a limit (the bench, the GPU check). */
export { INSTANCE_WORKER_BYTES } from '../src/memory/model-footprint.ts';
