import type { LoadParameters } from './load-parameters.ts';

/** Triton's unload parameters (the repository extension's `unload_dependents`). */
export interface UnloadOptions {
  /**
   * Unload the models this one depends on as well (an ensemble's composing models), as
   * Triton's unload_dependents does. Triton accepts it on any model; a model that is not an
   * ensemble has none, so for every model Batchwise serves today it changes nothing. @default false
   */
  readonly unloadDependents?: boolean;
}

/** The write side of the models: the repository extension's load and unload. */
export interface ModelControl {
  /** Loads (or reloads) a model, optionally with a config override and file overrides. */
  load(name: string, parameters?: LoadParameters): Promise<void>;
  /** Unloads a model; resolves once its in-flight requests have finished. */
  unload(name: string, options?: UnloadOptions): Promise<void>;
  /**
   * --load-on-demand: whether a request for the model must wait for it to load first (the
   * repositories have it and it does not serve). False whenever the server does not load on demand.
   */
  awaitsLoad(name: string): boolean;
  /**
   * --load-on-demand: loads the model for a request, or joins the load under way, and resolves once
   * it serves; throws its load error (at once during the back-off after a failure), or UNAVAILABLE
   * when it has not loaded within `timeoutMs` (@default --load-on-demand-timeout-secs).
   */
  loadForRequest(name: string, timeoutMs?: number): Promise<void>;
}
