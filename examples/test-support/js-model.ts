/**
 * Runs an example JavaScript model in the test's own process, as the server's JS backend would
 * call it: the committed model file, its committed config.pbtxt parsed by the server's parser,
 * initialize with the model and version folders, execute with a batch of requests.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { JsModel, ModelRequest, ModelResponse, Tensor } from '@batchwise/backend';
import { parseModelConfig } from '@batchwise/server';

export const EXAMPLE_REPOSITORY = new URL('../model_repository/', import.meta.url).pathname;

export async function loadExampleJsModel(name: string, version = '1'): Promise<JsModel> {
  const modelDir = join(EXAMPLE_REPOSITORY, name);
  const versionDir = join(modelDir, version);
  const config = parseModelConfig(await readFile(join(modelDir, 'config.pbtxt'), 'utf8')) as unknown as Record<string, unknown>;
  const exported = ((await import(pathToFileURL(join(versionDir, 'model.mjs')).href)) as { default: unknown }).default;
  const model = (typeof exported === 'function' ? new (exported as new () => JsModel)() : exported) as JsModel;
  await model.initialize?.({
    config,
    modelName: name,
    modelVersion: version,
    instanceName: `${name}_0`,
    instanceKind: 'KIND_CPU',
    deviceId: 0,
    modelDir,
    versionDir,
  });
  return model;
}

export function request(inputs: readonly Tensor[]): ModelRequest {
  return {
    inputs: Object.fromEntries(inputs.map((t) => [t.name, t])),
    requestedOutputs: [],
    parameters: {},
    signal: new AbortController().signal,
  };
}

/** A non-decoupled model's responses to a batch; fails the test if the model returned none. */
export async function execute(model: JsModel, requests: readonly ModelRequest[]): Promise<readonly (ModelResponse | Error)[]> {
  const responses = await model.execute(requests);
  if (!responses) throw new Error('the model returned no responses (a decoupled model sends them instead)');
  return responses;
}

/** The outputs of a response by name; fails the test if the response is an error. */
export function outputsOf(response: ModelResponse | Error): Record<string, Tensor> {
  if (response instanceof Error) throw response;
  if ('error' in response) throw response.error;
  return Object.fromEntries(response.outputs.map((t) => [t.name, t]));
}
