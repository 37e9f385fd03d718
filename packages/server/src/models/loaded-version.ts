import type { ModelInstance } from '../backends/backend.ts';
import type { EnsemblePlan } from '../config/ensemble.ts';
import type { ModelConfig } from '../config/model-config.ts';
import type { VersionStatistics } from '../metrics/version-statistics.ts';
import type { Scheduler } from '../scheduler/scheduler.ts';
import type { DataType } from '../tensor/datatype.ts';

/** An input as requests must send it, decided once at load time. */
export interface InputSpec {
  readonly name: string;
  readonly datatype: DataType;
  /** Config dims without the batch dimension; -1 = any. */
  readonly dims: readonly number[];
  /** Dims the model receives (reshape), without the batch dimension. */
  readonly modelDims: readonly number[] | undefined;
  readonly optional: boolean;
}

export interface OutputSpec {
  readonly name: string;
  readonly datatype: DataType;
  readonly dims: readonly number[];
  /** Dims the model gives (reshape), without the batch dimension, when config.pbtxt reshapes them to `dims`. */
  readonly modelDims: readonly number[] | undefined;
  /** Class labels from the output's label_filename, one per line, for the classification extension. */
  readonly labels: readonly string[] | undefined;
}

/** One model version that loaded: its config, instances, scheduler and statistics. */
export interface LoadedVersion {
  readonly modelName: string;
  readonly version: string;
  readonly config: ModelConfig;
  readonly maxBatchSize: number;
  readonly inputs: readonly InputSpec[];
  readonly inputsByName: ReadonlyMap<string, InputSpec>;
  readonly outputs: readonly OutputSpec[];
  readonly outputsByName: ReadonlyMap<string, OutputSpec>;
  readonly instances: readonly ModelInstance[];
  /** The most JavaScript heap one batch's BYTES strings may take in an instance (element-cost.ts); Infinity when not limited. */
  readonly maxBatchStringHeapBytes: number;
  readonly scheduler: Scheduler;
  readonly stats: VersionStatistics;
  readonly executionProvider: string;
  readonly fallbackReason: string | undefined;
  /** Settings from the config that could not be applied, by name, with the reason (shown in metadata). */
  readonly unappliedSettings: Readonly<Record<string, string>>;
  /** An ensemble's steps (it has no instances of its own); it is ready only while every step's model is. */
  readonly ensemble?: EnsemblePlan;
}
