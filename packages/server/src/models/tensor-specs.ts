import type { ModelConfig } from '../config/model-config.ts';
import { CONFIG_TYPE_TO_DATATYPE } from '../tensor/datatype.ts';
import type { InputSpec, LoadedVersion, OutputSpec } from './loaded-version.ts';

/**
 * The inputs as requests must send them. An input may be left out only when the config says
 * so and `runsWithout` holds it: ONNX Runtime for Node.js runs a graph only with every input it
 * lists, so a request leaving one of those out is refused in validation (naming it) instead of
 * failing in the model (500).
 */
export function inputSpecsOf(config: ModelConfig, runsWithout: ReadonlySet<string>): InputSpec[] {
  return config.input.map((input) => ({
    name: input.name,
    datatype: CONFIG_TYPE_TO_DATATYPE[input.data_type]!,
    dims: input.dims,
    modelDims: input.reshape?.shape,
    optional: (input.optional ?? false) && runsWithout.has(input.name),
  }));
}

/** The outputs as responses carry them, with the class labels of those that have a label_filename. */
export function outputSpecsOf(config: ModelConfig, labels: ReadonlyMap<string, readonly string[]>): OutputSpec[] {
  return config.output.map((output) => ({
    name: output.name,
    datatype: CONFIG_TYPE_TO_DATATYPE[output.data_type]!,
    dims: output.dims,
    modelDims: output.reshape?.shape,
    labels: labels.get(output.name),
  }));
}

/** A version's tensors as LoadedVersion holds them: in config order and by name. */
export function tensorTables(
  inputs: readonly InputSpec[],
  outputs: readonly OutputSpec[],
): Pick<LoadedVersion, 'inputs' | 'inputsByName' | 'outputs' | 'outputsByName'> {
  return {
    inputs,
    inputsByName: new Map(inputs.map((i) => [i.name, i])),
    outputs,
    outputsByName: new Map(outputs.map((o) => [o.name, o])),
  };
}
