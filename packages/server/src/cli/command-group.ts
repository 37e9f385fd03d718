import type { Command } from 'commander';

/**
 * A command whose work is done by its subcommands (`batchwise`, `batchwise models`). Its own
 * options (the program's --version, every group's --help) are read only before the subcommand,
 * so a subcommand's option of the same name (`models canary simple --version 2`) stays the
 * subcommand's. Without a subcommand it exits 1, saying so on the first line of stderr before
 * its help.
 */
export function commandGroup(group: Command): Command {
  return group.enablePositionalOptions().addHelpText('before', ({ error, command }) => {
    if (!error) return '';
    const names = command.commands.map((c) => c.name());
    return `error: '${commandPath(command)}' needs a command: ${names.slice(0, -1).join(', ')} or ${names.at(-1)}`;
  });
}

/** `batchwise models canary`: the command's name after its parents'. */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}
