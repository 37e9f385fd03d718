import type { ModelConfig, ModelInstanceGroup } from './model-config.ts';

export interface NormalizeOptions {
  /** Whether a CUDA device is usable; decides what KIND_AUTO becomes. */
  readonly gpuAvailable: boolean;
}

/**
 * Fills the Triton defaults that the server relies on and the config endpoint shows.
 * Pure: returns a new config.
 */
export function normalizeModelConfig(config: ModelConfig, options: NormalizeOptions): ModelConfig {
  const out = structuredClone(config);
  const autoKind = options.gpuAvailable ? 'KIND_GPU' : 'KIND_CPU';
  out.version_policy ??= { latest: { num_versions: 1 } };
  out.default_model_filename ??= 'model.onnx';
  out.backend ??= 'onnxruntime';
  out.platform ??= 'onnxruntime_onnx';
  const groups: ModelInstanceGroup[] = out.instance_group?.length ? out.instance_group : [{}];
  out.instance_group = groups.map((group, i) => ({
    ...group,
    name: group.name || `${out.name}_${i}`,
    kind: !group.kind || group.kind === 'KIND_AUTO' ? autoKind : group.kind,
    count: group.count ?? 1,
  }));
  return out;
}
