import type { Backend } from '../backends/backend.ts';
import { JS_MODEL_FILES } from '../backends/js/model-file.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { isDecoupled } from '../config/transaction-policy.ts';
import { Errors } from '../errors/errors.ts';
import { fileExists } from '../repository/model-folder.ts';
import { resolveInModelFolder } from '../repository/model-paths.ts';
import { join } from 'node:path';

/**
 * A config that names no backend gets the one its files show, as Triton's auto-complete decides it:
 * `platform: "python"` (the older spelling), or a version folder holding model.py (or a
 * default_model_filename ending in .py) and no model.onnx, is a Python model; anything else stays
 * as it is (ONNX Runtime by default).
 */
export async function withBackendOfFiles(config: ModelConfig, modelDir: string, version: number): Promise<ModelConfig> {
  if (config.backend) return config;
  if (config.platform === 'python') return { ...config, backend: 'python' };
  if (config.platform) return config;
  const named = config.default_model_filename;
  const versionDir = join(modelDir, String(version));
  const python = named
    ? named.endsWith('.py')
    : (await fileExists(join(versionDir, 'model.py'))) && !(await fileExists(join(versionDir, 'model.onnx')));
  return python ? { ...config, backend: 'python' } : config;
}

/** The backend a (normalized) config asks for, among those the server has (`platform: "python"` is Triton's older spelling). */
export function chooseBackend(config: ModelConfig, backends: readonly Backend[]): Backend {
  const name = config.backend || (config.platform === 'python' ? 'python' : 'onnxruntime');
  const backend = backends.find((b) => b.name === name);
  if (!backend) {
    throw Errors.invalidArg(
      `model '${config.name}': unknown backend '${name}'; supported backends: ${backends.map((b) => `'${b.name}'`).join(', ')}`,
    );
  }
  if (isDecoupled(config) && !backend.runsModelCode) {
    throw Errors.invalidArg(
      `model '${config.name}': model_transaction_policy { decoupled: true } needs a model that sends its own responses: ` +
        `backend js or python (a response sender per request, see docs/js-backend.md), not backend '${backend.name}'`,
    );
  }
  return backend;
}

/**
 * The models of a backend whose tensors are the config's own (js, python) have no model file to complete
 * a config from: it must declare every tensor (a Python model's auto_complete_config may add them).
 */
export function requireDeclaredTensors(config: ModelConfig, backend: Backend): void {
  if (!backend.configDeclaresTensors) return;
  const missing = [config.input.length === 0 && 'input', config.output.length === 0 && 'output'].filter(Boolean);
  if (missing.length > 0) {
    const how =
      backend.name === 'python'
        ? "declare them in config.pbtxt, or add them in the model's auto_complete_config"
        : 'a JavaScript model has no file to auto-complete them from';
    throw Errors.invalidArg(
      `model '${config.name}': config.pbtxt declares no ${missing.join(' and no ')}; inputs and outputs must be declared for backend ${backend.name} ` +
        `(${how})`,
    );
  }
}

/** The file names a backend's model is looked for under, in order, when default_model_filename names none. */
const MODEL_FILES: Readonly<Record<string, readonly string[]>> = { js: JS_MODEL_FILES, python: ['model.py'] };

/**
 * The version's model file for that backend: default_model_filename, else the backend's own
 * names (model.onnx; model.mjs, then model.js; model.py), inside the model's folder. Fails naming what
 * was looked for, as paths inside the model folder.
 */
export async function modelFileOf(modelDir: string, version: number, config: ModelConfig, backend: Backend): Promise<string> {
  const names = config.default_model_filename ? [config.default_model_filename] : (MODEL_FILES[backend.name] ?? ['model.onnx']);
  for (const name of names) {
    const path = await resolveInModelFolder(modelDir, String(version), name, `model '${config.name}': default_model_filename`);
    if (await fileExists(path)) return path;
  }
  throw Errors.invalidArg(
    `model '${config.name}' version ${version}: model file ${names.map((n) => `${version}/${n}`).join(' or ')} not found`,
  );
}
