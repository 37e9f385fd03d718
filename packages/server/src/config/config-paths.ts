import type { ModelConfig } from './model-config.ts';

/**
 * A file path a config names, with the folder of the model it is read from, as Triton reads it:
 * the version folder (`<model>/<version>/`), the model folder, `<model>/warmup/` or
 * `<model>/initial_state/`.
 */
export interface ConfigPath {
  /** The field, as a message names it: `default_model_filename`, `label_filename of output 'PROB'`. */
  readonly field: string;
  /** The path as the config writes it. */
  readonly path: string;
  readonly under: 'version' | 'model' | 'warmup' | 'initial_state';
}

interface InitialState {
  readonly name?: string;
  readonly data_file?: string;
}

/**
 * Every file path a config names, whether the server reads the field or only parses it: a new
 * field that names a file belongs here, so that every load checks it stays inside the model's
 * folder (repository/model-paths.ts) before anything is opened.
 */
export function configPaths(config: ModelConfig): ConfigPath[] {
  const paths: ConfigPath[] = [];
  const add = (field: string, path: unknown, under: ConfigPath['under']) => {
    if (typeof path === 'string' && path !== '') paths.push({ field, path, under });
  };
  add('default_model_filename', config.default_model_filename, 'version');
  for (const [capability, path] of Object.entries((config['cc_model_filenames'] as Record<string, unknown> | undefined) ?? {})) {
    add(`cc_model_filenames['${capability}']`, path, 'version');
  }
  for (const output of config.output) add(`label_filename of output '${output.name}'`, output.label_filename, 'model');
  for (const sample of config.model_warmup ?? []) {
    for (const [input, data] of Object.entries(sample.inputs ?? {})) {
      add(`input_data_file of warmup sample '${sample.name}' input '${input}'`, data.input_data_file, 'warmup');
    }
  }
  const states = (config['sequence_batching'] as { state?: { initial_state?: InitialState[] }[] } | undefined)?.state ?? [];
  for (const state of states) {
    for (const initial of state.initial_state ?? []) {
      add(`data_file of initial_state '${initial.name ?? ''}'`, initial.data_file, 'initial_state');
    }
  }
  return paths;
}
