/**
 * Every option of every command, typed as a user types it after the command, lands in that
 * command's own options: no parent (the program's --version and --help) takes it, no option with
 * an optional or variadic value swallows the model name, no short flag is read by another command.
 * The walk goes over the real program (buildProgram) and runs nothing: a preAction hook on the
 * program stops each parse before any command's hooks and action.
 */
import { CommanderError, type Command, type Option } from 'commander';
import { describe, expect, it } from 'vitest';
import { SERVER_VERSION } from '../core/version.ts';
import { buildProgram } from './build-program.ts';
import { commandPath } from './command-group.ts';

/** A valid value for each placeholder the options and arguments write; a new placeholder fails the walk until it has one. */
const VALUES: Readonly<Record<string, string>> = {
  '<address>': '127.0.0.1',
  '<backend>,<setting>=<value>': 'python,shm-default-byte-size=4194304',
  '<bytes>': '1024',
  '<bytes|fraction>': '0.5',
  '<config.pbtxt>': 'config.pbtxt',
  '<count>': '16',
  '<dir>': 'tune-out',
  '<duration>': '250ms',
  '<fraction>': '0.1',
  '<key>': 'secret',
  '<level>': '1',
  '<list>': '1,4,16',
  '<location>': 's3://models/prod',
  '<model.onnx>': 'model.onnx',
  '<model>': 'simple',
  '<ms>': '100',
  '<n>': '3',
  '<name>': 'simple',
  '<name>:<count>[:<device>]': 'R1:2',
  '<names>': 'simple,text_*',
  '<path>': 'examples/model_repository',
  '<percent>': '20',
  '<port>': '8080',
  '<ratio>': '2',
  '<region>': 'us-east-1',
  '<secs>': '2',
  '<spec>': 'health:key=value',
  '<text>': 'why',
  '<url>': 'http://127.0.0.1:8002/metrics',
  '<value>': '1',
  '<version>': '2',
  '<weights>': '5,25,100',
  '<who>': 'ci',
  '[bool]': 'false',
};

function placeholderOf(option: Option): string {
  return option.flags.replace(/^(-\w, )?--[\w-]+ ?/, '');
}

function valueFor(option: Option): string {
  if (option.argChoices) return option.argChoices.at(-1)!;
  const value = VALUES[placeholderOf(option)];
  if (value === undefined) throw new Error(`no valid value for ${option.flags}: add '${placeholderOf(option)}' to VALUES`);
  return value;
}

/** The value the option's own parser makes of `value`, as commander stores it. */
function parsedValue(option: Option, value: string): unknown {
  return option.parseArg ? option.parseArg(value, option.defaultValue) : value;
}

function commandsOf(command: Command): Command[] {
  return [command, ...command.commands.flatMap(commandsOf)];
}

/** The names typed after `batchwise` to reach the command. */
function pathOf(command: Command): string[] {
  return commandPath(command).split(' ').slice(1);
}

const STOP = new Error('parsed; nothing runs');

interface Parsed {
  /** The command that would run. */
  readonly command?: Command;
  /** What commander wrote (help, version, errors). */
  readonly output: string;
  readonly error?: CommanderError;
}

/** Parses `args` (typed after `batchwise`) with a fresh program, stopping before anything runs. */
async function parse(args: readonly string[]): Promise<Parsed> {
  const program = buildProgram();
  let output = '';
  let command: Command | undefined;
  for (const c of commandsOf(program)) {
    c.exitOverride().configureOutput({ writeOut: (text) => void (output += text), writeErr: (text) => void (output += text) });
  }
  program.hook('preAction', (_program, actionCommand) => {
    command = actionCommand;
    throw STOP;
  });
  try {
    await program.parseAsync(args, { from: 'user' });
  } catch (error) {
    if (error !== STOP) {
      if (!(error instanceof CommanderError)) throw error;
      return { output, error };
    }
  }
  return { ...(command && { command }), output };
}

interface Typed {
  readonly words: readonly string[];
  readonly expected: unknown;
}

/** Each way a user types the option: long and short form, with its value; an optional value also left out. */
function typings(option: Option): Typed[] {
  return [option.long, option.short]
    .filter((flag) => flag !== undefined)
    .flatMap((flag): Typed[] => {
      if (option.isBoolean()) return [{ words: [flag], expected: !option.negate }];
      const value = valueFor(option);
      const withValue = { words: [flag, value], expected: parsedValue(option, value) };
      return option.required ? [withValue] : [{ words: [flag], expected: true }, withValue];
    });
}

const program = buildProgram();
const leaves = commandsOf(program).filter((c) => c.commands.length === 0);

describe('every option of every command, typed after the command', () => {
  it('walks every command of the program', () => {
    expect(leaves.map(commandPath)).toEqual([
      'batchwise serve',
      'batchwise doctor',
      'batchwise models promote',
      'batchwise models rollback',
      'batchwise models canary',
      'batchwise models list',
      'batchwise tune',
    ]);
  });

  for (const leaf of leaves) {
    describe(commandPath(leaf), () => {
      const args = leaf.registeredArguments.filter((a) => a.required).map((a) => VALUES[`<${a.name()}>`]!);
      for (const option of leaf.options) {
        it(`${option.flags} lands in its own options, before and after the arguments`, async () => {
          const mandatory = leaf.options.filter((o) => o.mandatory && o !== option).flatMap((o) => [o.long!, valueFor(o)]);
          for (const typed of typings(option)) {
            for (const words of [
              [...pathOf(leaf), ...typed.words, ...args, ...mandatory],
              [...pathOf(leaf), ...args, ...mandatory, ...typed.words],
            ]) {
              const parsed = await parse(words);
              const line = `batchwise ${words.join(' ')}`;
              expect(parsed.error?.message, line).toBeUndefined();
              expect(parsed.output, line).toBe('');
              expect(parsed.command && commandPath(parsed.command), line).toBe(commandPath(leaf));
              expect(parsed.command!.getOptionValueSource(option.attributeName()), line).toBe('cli');
              expect(parsed.command!.opts()[option.attributeName()], line).toEqual(typed.expected);
              expect(parsed.command!.args, `${line}: its arguments`).toEqual(args);
            }
          }
        });
      }
    });
  }
});

describe("the program's own options", () => {
  it('--version and -V before any command print the version', async () => {
    for (const flag of ['--version', '-V']) {
      const parsed = await parse([flag]);
      expect(parsed.error?.code).toBe('commander.version');
      expect(parsed.output).toBe(`${SERVER_VERSION}\n`);
    }
  });

  for (const command of commandsOf(program).slice(1)) {
    it(`--version and -V after '${commandPath(command)}' are never the program's`, async () => {
      for (const flag of ['--version', '-V']) {
        const parsed = await parse([...pathOf(command), flag]);
        expect(parsed.error?.code, `${commandPath(command)} ${flag}`).not.toBe('commander.version');
        expect(parsed.output).not.toContain(SERVER_VERSION);
      }
    });
  }

  for (const command of commandsOf(program)) {
    it(`--help and -h after '${commandPath(command)}' (and after its arguments) print its own help`, async () => {
      const args = command.registeredArguments.filter((a) => a.required).map((a) => VALUES[`<${a.name()}>`]!);
      for (const words of [['--help'], ['-h'], [...args, '--help']]) {
        const parsed = await parse([...pathOf(command), ...words]);
        expect(parsed.error?.code).toBe('commander.helpDisplayed');
        expect(parsed.output.split('\n')[0]).toBe(`Usage: ${commandPath(command)} ${command.usage()}`);
      }
    });
  }

  it('no command declares a flag twice, long or short', () => {
    for (const command of commandsOf(program)) {
      const flags = command.options.flatMap((o) => [o.long, o.short].filter((f) => f !== undefined));
      expect(flags, commandPath(command)).toEqual([...new Set(flags)]);
    }
  });
});

/**
 * The default --help shows, as commander prints it: the option's defaultValueDescription, else the
 * value as JSON (a string in quotes, which a user types without them).
 */
function shownDefault(option: Option): string {
  const shown = option.defaultValueDescription ?? JSON.stringify(option.defaultValue);
  return /^".*"$/.test(shown) ? (JSON.parse(shown) as string) : shown;
}

describe('the defaults --help shows (issue 35: tune showed --budget 600000 and --concurrency [1,2,4,8,16,32])', () => {
  for (const leaf of leaves) {
    const defaulted = leaf.options.filter((o) => o.defaultValue !== undefined && !o.isBoolean());
    it(`${commandPath(leaf)}: each default is written as one types the flag's value, and typed so it gives the default`, () => {
      for (const option of defaulted) {
        const shown = shownDefault(option);
        let typed: unknown;
        try {
          typed = parsedValue(option, shown);
        } catch (error) {
          throw new Error(
            `${commandPath(leaf)} ${option.flags}: --help shows the default '${shown}', which the flag refuses: ${(error as Error).message}`,
          );
        }
        expect(typed, `${commandPath(leaf)} ${option.flags} (default shown: ${shown})`).toEqual(option.defaultValue);
      }
    });
  }
});

describe('a group without a command', () => {
  for (const group of commandsOf(program).filter((c) => c.commands.length > 0)) {
    it(`'${commandPath(group)}' exits 1 saying it needs a command, then its help`, async () => {
      const parsed = await parse(pathOf(group));
      expect(parsed.error?.exitCode).toBe(1);
      const [first, second] = parsed.output.split('\n');
      expect(first).toMatch(new RegExp(`^error: '${commandPath(group)}' needs a command: \\w+(, \\w+)* or \\w+$`));
      expect(second).toBe(`Usage: ${commandPath(group)} ${group.usage()}`);
    });
  }
});
