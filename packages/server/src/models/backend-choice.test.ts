import { describe, expect, it } from 'vitest';
import type { Backend } from '../backends/backend.ts';
import { parseModelConfig } from '../config/index.ts';
import { chooseBackend, requireDeclaredTensors } from './backend-choice.ts';

const backend = (name: string, codeBackend = false): Backend => ({
  name,
  ...(codeBackend && { runsModelCode: true, configDeclaresTensors: true }),
  createInstance: () => Promise.reject(new Error('not here')),
});
const backends = [backend('onnxruntime'), backend('js', true), backend('python', true)];
const io = 'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ] output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]';

describe('chooseBackend', () => {
  it('picks the backend the config names, onnxruntime when it names none', () => {
    expect(chooseBackend(parseModelConfig(`name: "m" backend: "js" ${io}`), backends).name).toBe('js');
    expect(chooseBackend(parseModelConfig('name: "m"'), backends).name).toBe('onnxruntime');
  });

  it('picks the python backend for backend "python" and for the older platform "python"', () => {
    for (const text of ['name: "m" backend: "python"', 'name: "m" platform: "python"']) {
      expect(chooseBackend(parseModelConfig(text), backends).name).toBe('python');
    }
  });

  it('lists the supported backends for an unknown one', () => {
    expect(() => chooseBackend(parseModelConfig('name: "m" backend: "tensorrt"'), backends)).toThrow(
      "model 'm': unknown backend 'tensorrt'; supported backends: 'onnxruntime', 'js', 'python'",
    );
  });

  it('refuses a decoupled model on a backend that runs no model code', () => {
    const decoupled = 'model_transaction_policy { decoupled: true }';
    expect(() => chooseBackend(parseModelConfig(`name: "m" ${decoupled}`), backends)).toThrow(/backend js or python/);
    expect(chooseBackend(parseModelConfig(`name: "m" backend: "python" ${decoupled}`), backends).name).toBe('python');
  });

  it('needs a js or python model to declare inputs and outputs, saying how for each', () => {
    expect(() => requireDeclaredTensors(parseModelConfig('name: "m" backend: "js"'), backends[1]!)).toThrow(
      "model 'm': config.pbtxt declares no input and no output; inputs and outputs must be declared for backend js",
    );
    expect(() => requireDeclaredTensors(parseModelConfig(`name: "m" backend: "python" ${io.split(' output')[0]}`), backends[2]!)).toThrow(
      /declares no output; .* backend python \(declare them in config.pbtxt, or add them in the model's auto_complete_config\)/,
    );
    expect(() => requireDeclaredTensors(parseModelConfig('name: "m"'), backends[0]!)).not.toThrow();
  });
});
