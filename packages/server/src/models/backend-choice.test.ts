import { describe, expect, it } from 'vitest';
import type { Backend } from '../backends/backend.ts';
import { parseModelConfig } from '../config/index.ts';
import { chooseBackend } from './backend-choice.ts';

const backend = (name: string): Backend => ({ name, createInstance: () => Promise.reject(new Error('not here')) });
const backends = [backend('onnxruntime'), backend('js')];
const io = 'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ] output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]';

describe('chooseBackend', () => {
  it('picks the backend the config names, onnxruntime when it names none', () => {
    expect(chooseBackend(parseModelConfig(`name: "m" backend: "js" ${io}`), backends).name).toBe('js');
    expect(chooseBackend(parseModelConfig('name: "m"'), backends).name).toBe('onnxruntime');
  });

  it('points a python model (backend or platform) at the JavaScript backend', () => {
    for (const text of ['name: "m" backend: "python"', 'name: "m" platform: "python"']) {
      expect(() => chooseBackend(parseModelConfig(text), backends)).toThrow(/backend: "js".*docs\/js-backend\.md/);
    }
  });

  it('lists the supported backends for an unknown one', () => {
    expect(() => chooseBackend(parseModelConfig('name: "m" backend: "tensorrt"'), backends)).toThrow(
      "model 'm': unknown backend 'tensorrt'; supported backends: 'onnxruntime', 'js'",
    );
  });

  it('needs a js model to declare inputs and outputs', () => {
    expect(() => chooseBackend(parseModelConfig('name: "m" backend: "js"'), backends)).toThrow(
      "model 'm': config.pbtxt declares no input and no output; inputs and outputs must be declared for backend js",
    );
  });
});
