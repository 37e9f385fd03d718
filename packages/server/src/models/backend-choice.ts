import type { Backend } from '../backends/backend.ts';
import { JS_MODEL_FILES } from '../backends/js/model-file.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { isDecoupled } from '../config/transaction-policy.ts';
import { Errors } from '../errors/errors.ts';
import { fileExists } from '../repository/model-folder.ts';
import { resolveInModelFolder } from '../repository/model-paths.ts';

/**
 * The backend a (normalized) config asks for, among those the server has. Triton's Python
 * backend has no place here: such a model fails to load with the way to port it.
 */
export function chooseBackend(config: ModelConfig, backends: readonly Backend[]): Backend {
  const name = config.backend || 'onnxruntime';
  if (name === 'python' || config.platform === 'python') {
    throw Errors.invalidArg(
      `model '${config.name}': the python backend is not supported by Batchwise; ` +
        'port model.py to the JavaScript backend (backend: "js", a model.mjs with initialize/execute/finalize, see docs/js-backend.md)',
    );
  }
  const backend = backends.find((b) => b.name === name);
  if (!backend) {
    throw Errors.invalidArg(
      `model '${config.name}': unknown backend '${name}'; supported backends: ${backends.map((b) => `'${b.name}'`).join(', ')}`,
    );
  }
  if (backend.name === 'js') requireDeclaredTensors(config);
  else if (isDecoupled(config)) {
    throw Errors.invalidArg(
      `model '${config.name}': model_transaction_policy { decoupled: true } needs a model that sends its own responses: ` +
        `backend js (a response sender per request, see docs/js-backend.md), not backend '${backend.name}'`,
    );
  }
  return backend;
}

/** JavaScript models have no file to complete a config from: their config declares every tensor. */
function requireDeclaredTensors(config: ModelConfig): void {
  const missing = [config.input.length === 0 && 'input', config.output.length === 0 && 'output'].filter(Boolean);
  if (missing.length > 0) {
    throw Errors.invalidArg(
      `model '${config.name}': config.pbtxt declares no ${missing.join(' and no ')}; inputs and outputs must be declared for backend js ` +
        '(a JavaScript model has no file to auto-complete them from)',
    );
  }
}

/**
 * The version's model file for that backend: default_model_filename, else the backend's own
 * names (model.onnx; model.mjs, then model.js), inside the model's folder. Fails naming what
 * was looked for, as paths inside the model folder.
 */
export async function modelFileOf(modelDir: string, version: number, config: ModelConfig, backend: Backend): Promise<string> {
  const names = config.default_model_filename ? [config.default_model_filename] : backend.name === 'js' ? JS_MODEL_FILES : ['model.onnx'];
  for (const name of names) {
    const path = await resolveInModelFolder(modelDir, String(version), name, `model '${config.name}': default_model_filename`);
    if (await fileExists(path)) return path;
  }
  throw Errors.invalidArg(
    `model '${config.name}' version ${version}: model file ${names.map((n) => `${version}/${n}`).join(' or ')} not found`,
  );
}
