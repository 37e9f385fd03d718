/**
 * From flags to options, and the declared defaults for whatever is left unset: the one place
 * `startServer` and `batchwise serve` take their defaults from.
 */
import { MODEL_REPOSITORY_KEY_ENV, MODEL_REPOSITORY_KEY_HEADER } from './environment.ts';
import { SERVE_FLAGS, type FlagDeclaration } from './serve-flags.ts';
import type { ServeOptions, ServerOptions } from './server-options.ts';

type Declared = (typeof SERVE_FLAGS)[number];
/** The options a declared flag gives a default. */
type Defaulted = Extract<Declared, { readonly default: unknown }>['sets'];

/** Server options with every declared default in place. */
export type ResolvedServerOptions = ServerOptions &
  Required<Pick<ServerOptions, Defaulted & keyof ServerOptions>> & { readonly requestTimeoutMs: number };
/** `batchwise serve`'s options with every declared default in place. */
export type ResolvedServeOptions = ResolvedServerOptions & Required<Pick<ServeOptions, Defaulted>>;

/** Time allowed for a client to send a whole HTTP request; no flag sets it. */
const REQUEST_TIMEOUT_MS = 60_000;

const declarations: readonly FlagDeclaration[] = SERVE_FLAGS;

/** The option value a flag's value becomes (seconds to ms, a cache size to a cache spec). */
function optionValueOf(declaration: FlagDeclaration, value: unknown): unknown {
  return declaration.toOption ? (declaration.toOption.apply as (v: unknown) => unknown)(value) : value;
}

/** The declared default of every option a flag gives one, in the option's unit. */
export function declaredDefaults(): Partial<Record<keyof ServeOptions, unknown>> {
  const defaults: Partial<Record<keyof ServeOptions, unknown>> = {};
  for (const declaration of declarations) {
    if (declaration.default !== undefined && !(declaration.sets in defaults)) {
      defaults[declaration.sets] = optionValueOf(declaration, declaration.default);
    }
  }
  return defaults;
}

/** The options with the declared defaults where they are unset (the process options' too). */
export function resolveServerOptions(options: ServeOptions): ResolvedServeOptions {
  const resolved: Record<string, unknown> = { requestTimeoutMs: REQUEST_TIMEOUT_MS };
  for (const [option, value] of Object.entries(declaredDefaults())) resolved[option] = value;
  for (const [option, value] of Object.entries(options)) if (value !== undefined) resolved[option] = value;
  return resolved as unknown as ResolvedServeOptions;
}

/** The attribute a flag's value is found under in parsed flags (`--grpc-keepalive-time` → `grpcKeepaliveTime`). */
export function attributeOf(flag: string): string {
  return flag.replace(/^--/, '').replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
}

/**
 * The options the flags given set, in declaration order (so Triton's --http-max-input-size
 * wins over --http-max-body-bytes), then the declared defaults. `given` holds only the flags
 * on the command line, under their attribute names.
 */
export function serveOptionsFrom(given: Readonly<Record<string, unknown>>, env: NodeJS.ProcessEnv): ResolvedServeOptions {
  const options: Record<string, unknown> = {};
  for (const declaration of declarations) {
    let value = given[attributeOf(declaration.flag)];
    if (value === undefined && declaration.env !== undefined && env[declaration.env] === '1') value = true;
    if (value === undefined) continue;
    const optionValue = optionValueOf(declaration, value);
    const previous = options[declaration.sets];
    switch (declaration.combine ?? 'replace') {
      case 'replace':
        options[declaration.sets] = optionValue;
        break;
      case 'or':
        options[declaration.sets] = Boolean(previous) || Boolean(optionValue);
        break;
      case 'append':
        options[declaration.sets] = [...((previous as readonly unknown[] | undefined) ?? []), ...(optionValue as readonly unknown[])];
        break;
    }
  }
  const resolved = resolveServerOptions(options as unknown as ServeOptions);
  const key = env[MODEL_REPOSITORY_KEY_ENV];
  if (!key) return resolved;
  // The key restricts the model-repository group of both frontends (SERVE_ENVIRONMENT).
  const keySpec = `model-repository:${MODEL_REPOSITORY_KEY_HEADER}=${key}`;
  return {
    ...resolved,
    httpRestrictedApi: [...resolved.httpRestrictedApi, keySpec],
    grpcRestrictedProtocol: [...resolved.grpcRestrictedProtocol, keySpec],
  };
}
