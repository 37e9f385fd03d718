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
  return withOutput(await caller(request));
}

/** Where the server's worker thread puts the function that carries `inferModelStream` calls (as MODEL_CALLER). */
export const MODEL_STREAM_CALLER = Symbol.for('@batchwise/backend.modelStreamCaller');

/** What the server provides: the called model's responses as it sends them; throws ModelCallError. */
export type ModelStreamCaller = (request: InferModelRequest) => AsyncIterable<Omit<InferModelResult, 'output'>>;

/**
 * Calls another model of this server and yields each of its responses as the model sends them
 * (Triton's BLS `exec(decoupled=True)`): a decoupled model's zero or more responses, another
 * model's one. The server sends a few responses ahead of what the loop took, no more: a loop that
 * reads slowly holds the called model back. Leaving the loop early cancels the call, as aborting
 * `signal` does. An error response, or the call's failure, throws ModelCallError and ends the call.
 */
export async function* inferModelStream(request: InferModelRequest): AsyncGenerator<InferModelResult, void, undefined> {
  const caller = (globalThis as Record<symbol, unknown>)[MODEL_STREAM_CALLER] as ModelStreamCaller | undefined;
  if (caller === undefined) {
    throw new ModelError('inferModelStream is available only inside a model that the Batchwise server runs (backend: "js")', 'UNAVAILABLE');
  }
  for await (const result of caller(request)) yield withOutput(result);
}

function withOutput(result: Omit<InferModelResult, 'output'>): InferModelResult {
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
