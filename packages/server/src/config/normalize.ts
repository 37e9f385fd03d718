import { isEnsembleConfig } from './ensemble.ts';
import type { ModelConfig, ModelInstanceGroup } from './model-config.ts';
import { normalizeSequenceBatching } from './sequence-batching.ts';

export interface NormalizeOptions {
  /** CUDA device ids visible to this process (backends/gpu-detect.ts); empty without a GPU. */
  readonly visibleGpuIds: readonly number[];
}

/**
 * Fills the Triton defaults that the server relies on and the config endpoint shows, as
 * Triton's NormalizeInstanceGroup does: the implicit group is named after the model, KIND_AUTO
 * becomes KIND_GPU only when every GPU it lists is visible, and a KIND_GPU group without `gpus`
 * gets every visible GPU (its `count` instances are placed on each). Pure: returns a new config.
 *
 * Unlike Triton, a KIND_CPU group without `count` gets 1 instance, not 2 (docs/triton-compatibility.md,
 * "Backends, datatypes and ONNX Runtime"): one ONNX Runtime session already spreads a run over every core.
 */
export function normalizeModelConfig(config: ModelConfig, options: NormalizeOptions): ModelConfig {
  const out = structuredClone(config);
  out.version_policy ??= { latest: { num_versions: 1 } };
  // An ensemble has no model file and no instances of its own: its steps' models have them.
  if (isEnsembleConfig(out)) {
    out.platform = 'ensemble';
    return out;
  }
  out.backend ??= 'onnxruntime';
  if (out.sequence_batching) out.sequence_batching = normalizeSequenceBatching(out.sequence_batching, out.max_batch_size ?? 0);
  // Triton shows a model of a backend without platforms (python; here js) with its backend only.
  if (out.backend === 'onnxruntime') {
    out.default_model_filename ??= 'model.onnx';
    out.platform ??= 'onnxruntime_onnx';
  }
  const visible = new Set(options.visibleGpuIds);
  const groups: ModelInstanceGroup[] = out.instance_group?.length ? out.instance_group : [{ name: out.name }];
  out.instance_group = groups.map((group, i) => {
    const kind = resolveKind(group, visible);
    const gpus = kind === 'KIND_GPU' && !group.gpus?.length ? [...visible].sort((a, b) => a - b) : group.gpus;
    return {
      ...group,
      name: group.name || `${out.name}_${i}`,
      kind,
      count: group.count ?? 1,
      ...(gpus && gpus.length > 0 && { gpus }),
    };
  });
  return out;
}

function resolveKind(group: ModelInstanceGroup, visible: ReadonlySet<number>): NonNullable<ModelInstanceGroup['kind']> {
  if (group.kind && group.kind !== 'KIND_AUTO') return group.kind;
  if (visible.size === 0) return 'KIND_CPU';
  return (group.gpus ?? []).every((id) => visible.has(id)) ? 'KIND_GPU' : 'KIND_CPU';
}
