import { Option, type Command } from 'commander';
import { SERVE_FLAGS, type FlagDeclaration, type FlagValueKind } from '../options/index.ts';
import { collect, parseBool, parseNonNegativeNumber, parsePort, parsePositiveInteger } from './flags.ts';

const PARSERS: Record<FlagValueKind, ((value: string, previous: unknown) => unknown) | undefined> = {
  port: parsePort,
  bool: parseBool,
  'positive-integer': parsePositiveInteger,
  number: parseNonNegativeNumber,
  string: undefined,
  list: (value, previous) => collect(value, previous as string[] | undefined),
  choice: undefined,
};

/** A declared default as --help and docs/cli.md write it. */
export function defaultTextOf(declaration: FlagDeclaration): string | undefined {
  if (declaration.defaultText !== undefined) return declaration.defaultText;
  if (declaration.default === undefined) return undefined;
  if (Array.isArray(declaration.default)) return declaration.default.length === 0 ? 'none' : declaration.default.join(', ');
  return String(declaration.default);
}

/**
 * The commander option of a declared flag. It carries no default: the values parsed are only
 * the flags given, and serveOptionsFrom adds the declared defaults (--help shows them).
 */
function optionOf(declaration: FlagDeclaration): Option {
  const shown = defaultTextOf(declaration);
  const env = declaration.env ? `; also ${declaration.env}=1` : '';
  const option = new Option(
    `${declaration.flag} ${declaration.value}`,
    `${declaration.meaning}${shown !== undefined ? ` (default: ${shown}${env})` : ''}`,
  );
  const parse = PARSERS[declaration.kind];
  if (parse) option.argParser<unknown>(parse);
  if (declaration.choices) option.choices(declaration.choices);
  if (declaration.required) option.makeOptionMandatory();
  return option;
}

/** Every flag of serve-flags.ts, as declared there. */
export function addServeFlags(command: Command): Command {
  for (const declaration of SERVE_FLAGS as readonly FlagDeclaration[]) command.addOption(optionOf(declaration));
  return command;
}
