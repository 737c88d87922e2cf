import test from 'ava';
import { readArgs, UsageError } from '../../cli/args.ts';

test('positionals and options are read; options may come anywhere', (t) => {
  const { positionals, values } = readArgs(['acme', '--env', 'acme-test', 'abcde'], { env: 'string' }, ['org-slug', 'suffix']);
  t.deepEqual(positionals, ['acme', 'abcde']);
  t.is(values.env, 'acme-test');
});

test('a missing or an extra argument, an unknown option and a repeated one are usage errors that say which', (t) => {
  const read = (argv: string[]) => () => readArgs(argv, { env: 'string' }, ['slug']);
  t.throws(read([]), { instanceOf: UsageError, message: 'expected <slug>' });
  t.throws(read(['b4', 'extra']), { instanceOf: UsageError, message: 'unexpected argument "extra" (expected <slug>)' });
  t.throws(read(['b4', '--env', 'a', '--env', 'b']), { instanceOf: UsageError, message: '--env given twice' });
  t.throws(read(['b4', '--nope', 'x']), { instanceOf: UsageError, message: /--nope/ });
});
