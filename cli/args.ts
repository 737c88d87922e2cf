// The command line read against the usage table (cli/usage.ts): which command, whether help was
// asked for, and a command's arguments and options. Every mistake is a UsageError (exit 2) whose
// one line says what is wrong and what the command expects.
import { accepted, commandHelp, groupHelp, isCommand, overview, spec, subcommands, synopsis, type CommandName } from './usage.ts';

export class UsageError extends Error {
  /** After the message on the same line: the command's synopsis, or where to find the commands. */
  readonly hint: string;
  constructor(message: string, command?: CommandName) {
    super(message);
    this.hint = command ? `usage: ${synopsis(command)}` : 'intake help lists the commands';
  }
}

/** What the command line asks for: help text to print (with its exit status) or a command to run. */
export type Route = { help: string; exit: 0 | 2 } | { command: CommandName; argv: string[] };

const HELP = new Set(['help', '--help', '-h']);

/**
 * `intake help [<group> [<sub>]]`, `intake <command> --help` and `intake <group> help` print
 * usage and exit 0. A group without its subcommand prints the group's usage too, but is a usage
 * mistake (exit 2, on stderr): nothing was done, and a script must not take it for success.
 */
export function route(argv: string[]): Route {
  const [first, second] = argv;
  if (first === undefined) throw new UsageError('expected a command');
  if (HELP.has(first)) return { help: helpFor(argv.slice(1)), exit: 0 };
  if (isCommand(first)) return wantsHelp(argv.slice(1)) ? { help: commandHelp(first), exit: 0 } : { command: first, argv: argv.slice(1) };
  if (!subcommands(first).length) throw new UsageError(`unknown command ${JSON.stringify(first)}`);
  if (second === undefined) return { help: groupHelp(first), exit: 2 };
  if (HELP.has(second)) return { help: groupHelp(first), exit: 0 };
  const name = `${first} ${second}`;
  if (!isCommand(name)) throw new UsageError(`unknown command ${JSON.stringify(name)}: ${first} takes ${subcommands(first).join(', ')}`);
  return wantsHelp(argv.slice(2)) ? { help: commandHelp(name), exit: 0 } : { command: name, argv: argv.slice(2) };
}

/** `intake help`, `intake help org`, `intake help org create`. */
function helpFor(topic: string[]): string {
  if (!topic.length) return overview();
  const name = topic.join(' ');
  if (isCommand(name)) return commandHelp(name);
  if (topic.length === 1 && subcommands(name).length) return groupHelp(name);
  throw new UsageError(`no help for ${JSON.stringify(name)}: unknown command`);
}

/** --help or -h anywhere among the options (not after `--`, where it would be an argument). */
function wantsHelp(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

export interface Args {
  positionals: string[];
  /** Each given option's text (`--name value` or `--name=value`). */
  values: Record<string, string | undefined>;
  /** Each whole-number option of the command, its default when not given. */
  numbers: Record<string, number>;
  /** A usage mistake found after reading (a bad value): the same one-line form. */
  usageError(message: string): UsageError;
}

/** A command's positional arguments and options, checked against its entry in the usage table. */
export function readArgs(argv: string[], command: CommandName): Args {
  const { args, options } = spec(command);
  const fail = (message: string) => new UsageError(message, command);
  const positionals: string[] = [];
  const values: Record<string, string | undefined> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const [flag, inline] = splitOption(arg);
    const name = flag.replace(/^--?/, '');
    const option = flag.startsWith('--') && Object.hasOwn(options, name) ? options[name] : undefined;
    if (!option) throw fail(Object.keys(options).length ? `unknown option ${flag}` : `unknown option ${flag}: ${command} takes none`);
    if (Object.hasOwn(values, name)) throw fail(`--${name} given twice`);
    if (option.flag) {
      if (inline !== undefined) throw fail(`--${name} takes no value`);
      values[name] = 'true';
      continue;
    }
    let value = inline;
    // The next argument is the value even when it starts with one dash (`--days -1` is a bad
    // number, not a missing one); one starting with two dashes is the next option.
    if (value === undefined && i + 1 < argv.length && !argv[i + 1].startsWith('--')) value = argv[++i];
    if (value === undefined) throw fail(`--${name} needs a value: ${option.value}`);
    values[name] = value;
  }
  const expected = args.map((a) => `<${a}>`);
  if (positionals.length > args.length) throw fail(`unexpected argument ${JSON.stringify(positionals[args.length])}`);
  if (positionals.length < args.length) throw fail(`missing ${expected.slice(positionals.length).join(' ')}`);
  const numbers: Record<string, number> = {};
  for (const [name, option] of Object.entries(options)) {
    const value = values[name];
    if (value === undefined) {
      if (option.required) throw fail(`--${name} ${option.value} is required`);
      if (option.whole) numbers[name] = option.whole.default;
      continue;
    }
    if (option.whole) numbers[name] = wholeNumber(value, option.whole, () => fail(`--${name} must be ${accepted(option)}, not ${JSON.stringify(value)}`));
    if (option.choices && !option.choices.includes(value)) throw fail(`--${name} must be ${accepted(option)}, not ${JSON.stringify(value)}`);
  }
  return { positionals, values, numbers, usageError: fail };
}

function splitOption(arg: string): [string, string | undefined] {
  const eq = arg.indexOf('=');
  return eq === -1 ? [arg, undefined] : [arg.slice(0, eq), arg.slice(eq + 1)];
}

/** Digits only (no sign, point, exponent or spaces) and within the bounds. */
function wholeNumber(text: string, bounds: { min: number; max: number }, fail: () => UsageError): number {
  if (!/^\d+$/.test(text)) throw fail();
  const n = Number(text);
  if (n < bounds.min || n > bounds.max) throw fail();
  return n;
}
