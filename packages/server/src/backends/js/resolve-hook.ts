import type { register as registerHooks } from 'node:module';

/**
 * A module resolution hook (node:module register, run on Node's loader thread) that sends
 * every import of '@batchwise/backend' to one URL, whoever imports it. Written as a data: URL
 * so that it is the same in a source checkout and in the compiled dist.
 */
const HOOK_SOURCE = `
let url;
export function initialize(data) { url = data.url; }
export async function resolve(specifier, context, next) {
  if (specifier === '@batchwise/backend') return { url, shortCircuit: true };
  return next(specifier, context);
}
`;

export function registerBackendResolution(register: typeof registerHooks, backendUrl: string): void {
  register(`data:text/javascript,${encodeURIComponent(HOOK_SOURCE)}`, { data: { url: backendUrl } });
}
