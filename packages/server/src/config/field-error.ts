import { InferenceServerError } from '../errors/errors.ts';

/** Where a value sits in a config: field names, list indexes and map keys, outermost first. */
export type FieldPath = readonly (string | number)[];

/**
 * A config value that parses but cannot be used, naming its field. parseModelConfig turns it into
 * `<file>:<line>:<col>: ...` at the value's position (pbtxt/locate.ts); a config that came as JSON
 * keeps the field path alone.
 */
export class ConfigFieldError extends InferenceServerError {
  constructor(
    readonly path: FieldPath,
    readonly problem: string,
  ) {
    super('INVALID_ARG', `${formatFieldPath(path)}: ${problem}`);
  }
}

/** `optimization.execution_accelerators.gpu_execution_accelerator[0].parameters['precision_mode']` */
export function formatFieldPath(path: FieldPath): string {
  let text = '';
  path.forEach((part, i) => {
    if (typeof part === 'number') text += `[${part}]`;
    else if (i > 0 && path[i - 1] === 'parameters') text += `['${part}']`;
    else text += i === 0 ? part : `.${part}`;
  });
  return text;
}
