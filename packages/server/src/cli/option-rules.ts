import type { Command, Option } from 'commander';
import { commandPath } from './command-group.ts';

/**
 * Which options a command's options go with, checked before it does anything: a command given an
 * option it would not read, or missing one it cannot do without, exits 1 naming them instead of
 * doing part of the work or ignoring what it was asked.
 */
export interface OptionRules {
  /** Each option given needs one of the options it names given too: `{ '--wait': ['--server-url'] }`. */
  readonly needs?: Readonly<Record<string, readonly string[]>>;
  /** Options read only when another is given: `{ '--steps': ['--interval', '--metrics-url'] }`. */
  readonly onlyWith?: Readonly<Record<string, readonly string[]>>;
  /** Exactly one option of each group is given. */
  readonly oneOf?: readonly (readonly string[])[];
}

function optionOf(command: Command, flag: string): Option {
  const option = command.options.find((o) => o.long === flag);
  if (!option) throw new Error(`'${commandPath(command)}' has no option ${flag}`);
  return option;
}

/** The user typed it: not its default, not its environment variable. */
function given(command: Command, flag: string): boolean {
  return command.getOptionValueSource(optionOf(command, flag).attributeName()) === 'cli';
}

function either(command: Command, flags: readonly string[]): string {
  const named = flags.map((flag) => optionOf(command, flag).flags);
  return named.length === 1 ? named[0]! : `${named.slice(0, -1).join(', ')} or ${named.at(-1)}`;
}

/** A preAction hook that holds the command to `rules` (every flag named is checked to exist when the hook runs). */
export function optionRules(rules: OptionRules): (command: Command) => void {
  return (command) => {
    for (const group of rules.oneOf ?? []) {
      const present = group.filter((flag) => given(command, flag));
      if (present.length === 0) command.error(`error: '${commandPath(command)}' needs ${either(command, group)}`);
      if (present.length > 1) command.error(`error: ${present.join(' and ')} cannot be given together`);
    }
    for (const [flag, needed] of Object.entries(rules.needs ?? {})) {
      if (given(command, flag) && !needed.some((n) => given(command, n))) command.error(`error: ${flag} needs ${either(command, needed)}`);
    }
    for (const [needed, flags] of Object.entries(rules.onlyWith ?? {})) {
      const ignored = given(command, needed) ? undefined : flags.find((flag) => given(command, flag));
      if (ignored) command.error(`error: ${ignored} is read only with ${either(command, [needed])}`);
    }
  };
}
