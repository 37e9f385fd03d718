import { ModelError } from './errors.ts';
import type { InferModelRequest, InferModelResult } from './types.ts';

/**
 * Where the server's worker thread puts the function that carries `inferModel` calls to the
 * server. A global symbol rather than module state, so that model code that bundled its own
 * copy of this package still reaches the server.
 */
export const MODEL_CALLER = Symbol.for('@batchwise/backend.modelCaller');

/** What the server provides: returns the called model's name, version and outputs, or throws ModelCallError. */
export type ModelCaller = (request: InferModelRequest) => Promise<Omit<InferModelResult, 'output'>>;

/**
 * Calls another model of this server from model code (Triton's BLS). The call is queued and
 * batched by that model's scheduler like any client request. Throws ModelCallError carrying
 * the server's code and message (an unknown model, a request the model refuses, its failure).
 */
export async function inferModel(request: InferModelRequest): Promise<InferModelResult> {
  const caller = (globalThis as Record<symbol, unknown>)[MODEL_CALLER] as ModelCaller | undefined;
  if (caller === undefined) {
    throw new ModelError('inferModel is available only inside a model that the Batchwise server runs (backend: "js")', 'UNAVAILABLE');
  }
  const result = await caller(request);
  const byName = new Map(result.outputs.map((t) => [t.name, t]));
  return {
    ...result,
    output(name: string) {
      const found = byName.get(name);
      if (!found) {
        throw new ModelError(
          `model '${result.model}' returned no output '${name}' (it returned: ${[...byName.keys()].join(', ') || 'none'})`,
        );
      }
      return found;
    },
  };
}
