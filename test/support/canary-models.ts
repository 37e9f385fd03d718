import { readFile } from 'node:fs/promises';

export type CanaryBehaviour = 'ok' | 'fail' | 'slow';

/**
 * A JavaScript model that answers Y = X; `behaviour` fails every batch or sleeps 400 ms first.
 * initialize() appends `<model>/<version>` to `initLog`, a file outside the repository, so a test
 * can count loads without changing any version folder.
 */
export function canaryModelSource(initLog: string, behaviour: CanaryBehaviour): string {
  return `
import { appendFileSync } from 'node:fs';
import { tensor } from '@batchwise/backend';
export default class {
  initialize(args) { appendFileSync(${JSON.stringify(initLog)}, args.modelName + '/' + args.modelVersion + '\\n'); }
  async execute(requests) {
    ${behaviour === 'fail' ? "throw new Error('canary is broken');" : ''}
    ${behaviour === 'slow' ? 'await new Promise((resolve) => setTimeout(resolve, 400));' : ''}
    return requests.map((r) => ({ outputs: [tensor('Y', 'FP32', r.inputs.X.shape, r.inputs.X.data)] }));
  }
}
`;
}

/** The config of a canary test model: batching, one FP32 input. */
export function canaryModelConfig(name: string, extra = ''): string {
  return `name: "${name}"
backend: "js"
max_batch_size: 64
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { }
${extra}`;
}

export const CANARY_INPUT = [{ name: 'X', datatype: 'FP32' as const, shape: [1, 1], data: [1] }];

/** How many times initialize() ran for a model version. */
export async function initCount(initLog: string, model: string, version: string): Promise<number> {
  const text = await readFile(initLog, 'utf8').catch(() => '');
  return text.split('\n').filter((line) => line === `${model}/${version}`).length;
}
