export type { ProcessOptions, ServeOptions, ServerOptions } from './server-options.ts';
export { SERVE_ENVIRONMENT, SERVE_FLAGS, type FlagDeclaration, type FlagValueKind } from './serve-flags.ts';
export {
  attributeOf,
  declaredDefaults,
  resolveServerOptions,
  serveOptionsFrom,
  type ResolvedServeOptions,
  type ResolvedServerOptions,
} from './resolve-options.ts';
