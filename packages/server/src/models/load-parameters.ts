import { posix } from 'node:path';
import { Errors } from '../errors/errors.ts';

/**
 * A parameter of a repository load request, as a frontend received it: HTTP gives `file:`
 * parameters as base64 text and the others as JSON values, gRPC as the ModelRepositoryParameter
 * oneof. BYTES values are decoded only once their size has passed the limit.
 */
export type LoadParameter =
  | { readonly type: 'STRING'; readonly value: string }
  | { readonly type: 'INT' | 'DOUBLE'; readonly value: number }
  | { readonly type: 'BOOL'; readonly value: boolean }
  | { readonly type: 'BYTES'; readonly byteLength: number; bytes(): Uint8Array };

export type LoadParameters = Readonly<Record<string, LoadParameter>>;

/** What a load request asks for, checked: a config override and files that replace the model's. */
export interface ModelLoadRequest {
  /** Model configuration JSON that replaces config.pbtxt. */
  readonly config?: string;
  /** File overrides by path inside the model folder (`1/model.onnx`); none: load from the repository. */
  readonly files: ReadonlyMap<string, Uint8Array>;
}

/** Triton's `file:<version>/<name>` load parameters. */
export const FILE_PARAMETER_PREFIX = 'file:';

/** The CLI flag that sets the limit on the file overrides of one load request. */
export const FILE_OVERRIDE_LIMIT_FLAG = '--model-load-files-max-bytes';
/** @default 128 MiB: the base64 of that much still fits the default HTTP body limit (256 MiB). */
export const DEFAULT_FILE_OVERRIDE_MAX_BYTES = 128 * 1024 * 1024;

/**
 * The repository extension's load parameters, as Triton's model repository manager reads them
 * (model_repository_manager.cc), for both protocols: `config` (a string of model configuration
 * JSON) and `file:<path>` (bytes) that replace the model's files; a file override requires the
 * config; anything else is refused. The files of one request may take at most `maxFileBytes`.
 */
export function modelLoadRequestOf(parameters: LoadParameters, maxFileBytes: number): ModelLoadRequest {
  let config: string | undefined;
  const fileParameters: [string, string, Extract<LoadParameter, { type: 'BYTES' }>][] = [];
  let fileBytes = 0;
  for (const [name, parameter] of Object.entries(parameters)) {
    if (name === 'config') {
      if (parameter.type !== 'STRING') throw Errors.invalidArg("Config parameter 'config' must have string type for its value");
      config = parameter.value;
    } else if (name.startsWith(FILE_PARAMETER_PREFIX)) {
      if (parameter.type !== 'BYTES') throw Errors.invalidArg(`File parameter '${name}' must have bytes type for its value`);
      fileBytes += parameter.byteLength;
      if (fileBytes > maxFileBytes) {
        throw Errors.invalidArg(
          `'${name}' exceeds the maximum allowed data size limit of ${maxFileBytes} bytes (${FILE_OVERRIDE_LIMIT_FLAG}): ` +
            `the file overrides of this load request take ${fileBytes} bytes or more`,
        );
      }
      fileParameters.push([name, overridePath(name), parameter]);
    } else {
      throw Errors.invalidArg(`Unrecognized load parameter '${name}' with type '${parameter.type}'`);
    }
  }
  if (fileParameters.length > 0 && config === undefined) {
    throw Errors.invalidArg("Load parameter 'config' must be specified for model file override");
  }
  const files = new Map(fileParameters.map(([, path, parameter]) => [path, parameter.bytes()]));
  return { ...(config !== undefined && { config }), files };
}

/** Core Triton's ValidateModelName: a model to load is named by one folder, never a path. */
export function checkNameToLoad(name: string): void {
  const trimmed = name.trim();
  if (trimmed === '') throw Errors.invalidArg('Model name cannot be empty. Please enter a valid name to deploy.');
  if (trimmed === '..' || trimmed.includes('/')) {
    throw Errors.invalidArg(`invalid model name '${name}', model name must not contain path traversal characters`);
  }
  // The repository takes no folder starting with '.' for a model (checkModelName): nor does a load, overrides or not.
  if (trimmed.startsWith('.')) {
    throw Errors.invalidArg(`invalid model name '${name}', model name must not start with '.' (such folders are not models)`);
  }
}

/** The file's path inside the model folder; one that would leave the folder is refused, as Triton does. */
function overridePath(name: string): string {
  const relative = name.slice(FILE_PARAMETER_PREFIX.length);
  const path = posix.normalize(relative);
  if (relative === '' || path.startsWith('/') || path === '.' || path === '..' || path.startsWith('../') || path.endsWith('/')) {
    throw Errors.invalidArg(`Invalid file parameter '${name}' with normalized path '${path}' must stay within model directory.`);
  }
  return path;
}
