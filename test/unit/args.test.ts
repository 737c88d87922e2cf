// The command line against the usage table: routing (help, groups, commands), every command's
// --help, and readArgs' usage errors (one line, with the command's synopsis as the hint).
import test from 'ava';
import { readArgs, route, UsageError } from '../../cli/args.ts';
import { COMMANDS, commandHelp, GROUPS, groupHelp, overview, subcommands, synopsis, type CommandName } from '../../cli/usage.ts';

const names = Object.keys(COMMANDS) as CommandName[];

/** The UsageError `fn` throws (anything else fails the test). */
function usageError(fn: () => unknown): UsageError {
  try {
    fn();
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error('expected a UsageError');
}

test('positionals and options are read; options may come anywhere, as --name value or --name=value', (t) => {
  const { positionals, values } = readArgs(['acme', '--env', 'acme-test', 'abcde'], 'key revoke');
  t.deepEqual(positionals, ['acme', 'abcde']);
  t.is(values.env, 'acme-test');
  t.is(readArgs(['acme', '--env=acme-test'], 'key list').values.env, 'acme-test');
  // After `--`, everything is an argument (a messageId may start with a dash).
  t.deepEqual(readArgs(['acme', '--', '-odd-id'], 'events get').positionals, ['acme', '-odd-id']);
});

test('a missing or an extra argument, an unknown option and a repeated one are usage errors that say which, with the synopsis', (t) => {
  const read = (argv: string[]) => usageError(() => readArgs(argv, 'key list'));
  t.is(read([]).message, 'missing <org-slug>');
  t.is(read([]).hint, 'usage: intake key list <org-slug> [--env <path-value>]');
  t.is(usageError(() => readArgs(['acme'], 'journey publish')).message, 'missing <journey-id>');
  t.is(usageError(() => readArgs([], 'consent get')).message, 'missing <org-slug> <email|sms> <address>');
  t.is(read(['b4', 'extra']).message, 'unexpected argument "extra"');
  t.is(read(['b4', '--env', 'a', '--env', 'b']).message, '--env given twice');
  t.is(read(['b4', '--nope', 'x']).message, 'unknown option --nope');
  t.is(read(['b4', '-x']).message, 'unknown option -x');
  t.is(read(['b4', '--env']).message, '--env needs a value: <path-value>');
  t.is(read(['b4', '--env', '--env']).message, '--env needs a value: <path-value>');
  t.is(usageError(() => readArgs(['extra'], 'gateway')).message, 'unexpected argument "extra"');
  t.is(usageError(() => readArgs(['--port', '1'], 'worker')).message, 'unknown option --port: worker takes none');
});

test('a required option that is missing is a usage error naming it, for every command that has one', (t) => {
  let checked = 0;
  for (const name of names) {
    const { args, options } = COMMANDS[name];
    for (const [option, spec] of Object.entries(options)) {
      if (!('required' in spec)) continue;
      // Every other required option given, so the missing one is the one reported.
      const others = Object.entries(options).flatMap(([o, s]) => (o !== option && 'required' in s ? [`--${o}`, 'x'] : []));
      const err = usageError(() => readArgs([...args.map(() => 'a'), ...others], name));
      t.is(err.message, `--${option} ${spec.value} is required`, name);
      t.is(err.hint, `usage: ${synopsis(name)}`);
      checked++;
    }
  }
  t.true(checked >= 4, 'org features --set, env create --key, journey create --file, import --file');
  t.is(usageError(() => readArgs(['acme'], 'journey create')).message, '--file <journey.json> is required');
  t.is(usageError(() => readArgs(['acme', 'staging'], 'env create')).message, '--key <environment-key> is required');
  // An empty --set is a value (it clears every feature).
  t.is(readArgs(['acme', '--set', ''], 'org features').values.set, '');
});

test('whole-number options: anything but digits within the bounds is refused in words a person can act on', (t) => {
  const bad = ['-1', '0', 'abc', '1.5', '99999999999999999999', '1e3', ' 7', '+5', '0x10', ''];
  const cases: [CommandName, string, string][] = [
    ['events names', 'days', '--days must be a whole number of days from 1 to 3650'],
    ['events activity', 'limit', '--limit must be a whole number of events from 1 to 10000'],
    ['import', 'concurrency', '--concurrency must be a whole number of requests from 1 to 100'],
  ];
  for (const [name, option, message] of cases) {
    const required = name === 'import' ? ['--file', 'f'] : [];
    for (const value of bad) {
      for (const form of [[`--${option}`, value], [`--${option}=${value}`]]) {
        const err = usageError(() => readArgs(['acme', ...required, ...form], name));
        t.is(err.message, `${message}, not ${JSON.stringify(value)}`, `${name} ${form.join(' ')}`);
      }
    }
    // No parser internals in any of them (node:util parseArgs said "argument is ambiguous" for -1).
    t.notRegex(usageError(() => readArgs(['acme', ...required, `--${option}`, '-1'], name)).message, /ambiguous|ERR_|parseArgs/);
  }
  t.is(readArgs(['acme'], 'events names').numbers.days, 30, 'the default');
  t.is(readArgs(['acme', '--days', '3650'], 'events names').numbers.days, 3650);
  t.is(readArgs(['acme', '--days', '007'], 'events names').numbers.days, 7);
  t.is(readArgs(['acme'], 'events activity').numbers.limit, 100);
  t.is(readArgs(['acme', '--limit=1'], 'events activity').numbers.limit, 1);
});

test('an option with fixed choices refuses anything else', (t) => {
  t.is(
    usageError(() => readArgs(['acme', 'email', 'a@b.c', '--purpose', 'sales'], 'consent get')).message,
    '--purpose must be marketing or tracking, not "sales"',
  );
  t.is(readArgs(['acme', 'email', 'a@b.c', '--purpose', 'tracking'], 'consent get').values.purpose, 'tracking');
});

test('every group without its command prints the group usage as a usage mistake (exit 2); asked for, exit 0', (t) => {
  t.deepEqual(GROUPS, ['org', 'env', 'key', 'events', 'journey', 'consent', 'users', 'operator']);
  for (const group of GROUPS) {
    const text = groupHelp(group);
    t.deepEqual(route([group]), { help: text, exit: 2 }, group);
    for (const asked of [
      [group, '--help'],
      [group, '-h'],
      [group, 'help'],
      ['help', group],
    ])
      t.deepEqual(route(asked), { help: text, exit: 0 }, asked.join(' '));
    t.true(text.startsWith(`usage: intake ${group} <command>\n`));
    for (const sub of subcommands(group)) t.true(text.includes(`\n  ${synopsis(`${group} ${sub}` as CommandName)}\n`), `${group} ${sub}`);
    t.notRegex(text, /undefined/);
  }
});

test('every command has --help: its synopsis, what it does, and each option with what it accepts (exit 0)', (t) => {
  for (const name of names) {
    const text = commandHelp(name);
    const words = name.split(' ');
    for (const asked of [
      [...words, '--help'],
      [...words, '-h'],
      [...words, 'acme', '--env', 'x', '--help'],
      ['help', ...words],
    ]) {
      t.deepEqual(route(asked), { help: text, exit: 0 }, asked.join(' '));
    }
    t.true(text.startsWith(`usage: ${synopsis(name)}\n\n${COMMANDS[name].summary}`), name);
    for (const [option, spec] of Object.entries(COMMANDS[name].options)) {
      t.regex(text, new RegExp(`\\n  --${option} ${spec.value.replace(/[|]/g, '\\|')} +\\S`), `${name} --${option}`);
    }
    t.true(overview().includes(synopsis(name).slice('intake '.length)), `intake help lists ${name}`);
  }
  t.regex(commandHelp('events names'), /--days <days> +the window: a whole number of days from 1 to 3650, default 30/);
  t.regex(commandHelp('journey create'), /--file <journey\.json> +.*\(required\)/);
  t.regex(commandHelp('key list'), /environment-removed/);
});

test('commands are routed with their own arguments; unknown ones are usage errors', (t) => {
  t.deepEqual(route(['key', 'list', 'acme', '--env', 'x']), { command: 'key list', argv: ['acme', '--env', 'x'] });
  t.deepEqual(route(['import', 'acme', '--file', 'f']), { command: 'import', argv: ['acme', '--file', 'f'] });
  t.deepEqual(route(['gateway']), { command: 'gateway', argv: [] });
  // --help after `--` is an argument, not a request for help.
  t.deepEqual(route(['events', 'get', 'acme', '--', '--help']), { command: 'events get', argv: ['acme', '--', '--help'] });
  t.deepEqual(route(['help']), { help: overview(), exit: 0 });
  t.deepEqual(route(['--help']), { help: overview(), exit: 0 });
  const none = usageError(() => route([]));
  t.is(`${none.message} (${none.hint})`, 'expected a command (intake help lists the commands)');
  t.is(usageError(() => route(['orgs'])).message, 'unknown command "orgs"');
  t.is(usageError(() => route(['org', 'delete'])).message, 'unknown command "org delete": org takes create, features');
  t.is(usageError(() => route(['help', 'nope'])).message, 'no help for "nope": unknown command');
});

test('a flag takes no value: present or absent, and the next argument stays positional', (t) => {
  t.is(readArgs(['acme', 'alice', '--suppress'], 'users forget').values.suppress, 'true');
  t.is(readArgs(['acme', '--suppress', 'alice'], 'users forget').positionals[1], 'alice');
  t.is(readArgs(['acme', 'alice'], 'users forget').values.suppress, undefined);
  t.is(usageError(() => readArgs(['acme', 'alice', '--suppress=yes'], 'users forget')).message, '--suppress takes no value');
  t.is(usageError(() => readArgs(['acme', 'alice', '--suppress', '--suppress'], 'users forget')).message, '--suppress given twice');
});
