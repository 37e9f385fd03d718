import type { ModelConfig } from '../../config/model-config.ts';
import { Errors } from '../../errors/errors.ts';
import type { InstanceDevice } from '../backend.ts';

/** Where a Python model instance runs, as its model.py is told (`initialize(args)`). */
export interface PythonPlacement {
  /** args['model_instance_kind'] is this without its `KIND_` ('CPU', 'GPU'), as Triton's TRITONSERVER_InstanceGroupKindString. */
  readonly kind: 'KIND_CPU' | 'KIND_GPU';
  /** args['model_instance_device_id']: the CUDA ordinal of the instance's GPU; 0 on the CPU. */
  readonly deviceId: number;
  /** Set when a KIND_GPU instance runs as KIND_CPU because no such GPU is visible and --allow-cpu-fallback said so. */
  readonly fallbackReason?: string;
}

export interface PlacementRequest {
  readonly config: ModelConfig;
  /** The instance's name, `<group>_<index>` (model-loader.ts names them so). */
  readonly instanceName: string;
  readonly device: InstanceDevice;
  readonly deviceId: number;
  readonly allowCpuFallback: boolean;
}

/** What the user can do instead, in the words the ONNX Runtime backend uses. */
const OTHERWISE = 'or set instance_group kind: KIND_CPU, or start with --allow-cpu-fallback to run it on the CPU knowingly';

/**
 * A Python instance's placement. A KIND_GPU instance runs on the GPU it was placed on (one process per
 * GPU and count, CUDA_VISIBLE_DEVICES untouched, as in Triton: the model picks `cuda:<device id>`), and
 * only where that GPU is visible to the server: else the load fails in Triton's words (core
 * model_config_utils.cc: "has kind KIND_GPU but no GPUs are available", "specifies invalid or
 * unsupported gpu id"), with what to do, or with --allow-cpu-fallback the instance is told KIND_CPU and
 * the reason is reported. Pure: the visible GPUs are a parameter.
 */
export function pythonPlacement(request: PlacementRequest, visibleGpuIds: readonly number[]): PythonPlacement {
  if (request.device !== 'gpu') return { kind: 'KIND_CPU', deviceId: 0 };
  if (visibleGpuIds.includes(request.deviceId)) return { kind: 'KIND_GPU', deviceId: request.deviceId };
  const group = `instance group ${groupOf(request.config, request.instanceName)} of model ${request.config.name}`;
  const reason =
    visibleGpuIds.length === 0
      ? `${group} has kind KIND_GPU but no GPUs are available: this process sees no NVIDIA GPU ` +
        '(no /dev/nvidia<N> device file, or NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES hide them)'
      : `${group} specifies invalid or unsupported gpu id ${request.deviceId}. The GPUs this process sees are: ${visibleGpuIds.join(', ')}`;
  if (request.allowCpuFallback) return { kind: 'KIND_CPU', deviceId: 0, fallbackReason: reason };
  throw Errors.invalidArg(
    `${reason}. Run it on a host with that NVIDIA GPU, ${OTHERWISE} (its model.py is then told model_instance_kind CPU)`,
  );
}

/** The name of the KIND_GPU group an instance belongs to (its name is `<group>_<index>`). */
function groupOf(config: ModelConfig, instanceName: string): string {
  const groups = (config.instance_group ?? []).filter((g) => g.kind === 'KIND_GPU' && g.name !== undefined);
  const own = groups.find((g) => instanceName.startsWith(`${g.name}_`)) ?? groups[0];
  return own?.name ?? instanceName;
}
