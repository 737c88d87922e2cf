// `intake operator add/remove/list/token/audit` as an operator runs them: one JSON document on
// stdout, one line on stderr and exit 1 (or 2 for a usage mistake), the password read from stdin
// and stored only as a salted scrypt hash, the token printed once and stored hashed.
import { spawn } from 'node:child_process';
import test from 'ava';
import { createDb, type Db } from '../../platform/db.ts';
import { verifyPassword } from '../../gateway/console/operators.ts';
import { addOperatorByCli, intakeWithInput } from '../helpers/console.ts';
import { ownDatabase, testConfig, testEnv } from '../helpers/services.ts';
import { intake } from '../security/cli.ts';

let env: Record<string, string>;
let db: Db;
test.before(async () => {
  env = testEnv({ DATABASE_URL: await ownDatabase('operator_cli') });
  db = createDb(testConfig(env));
  await db.operator.deleteMany();
});
test.after.always(() => db?.$disconnect());

const PASSWORD = 'a long enough password';

test.serial('add prints the operator; the password is kept as a salted scrypt hash only', async (t) => {
  const added = await addOperatorByCli(env, 'alice', 'admin', PASSWORD);
  t.like(added, { name: 'alice', role: 'admin' });
  t.true(Math.abs(added.createdAt - Date.now()) < 60_000);
  await addOperatorByCli(env, 'bob.viewer', 'read-only', PASSWORD);
  const [alice, bob] = await db.operator.findMany({ orderBy: { name: 'asc' } });
  t.regex(alice.passwordHash, /^scrypt\$32768\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
  t.false(alice.passwordHash.includes(PASSWORD));
  t.not(alice.passwordHash.split('$')[4], bob.passwordHash.split('$')[4], 'a salt per operator');
  t.not(alice.passwordHash.split('$')[5], bob.passwordHash.split('$')[5], 'the same password hashes differently');
  t.true(await verifyPassword(PASSWORD, alice.passwordHash));
  t.false(await verifyPassword(PASSWORD + 'x', alice.passwordHash));
  t.is(bob.role, 'read-only');
});

test.serial('list and token: the token is printed once and stored as its hash', async (t) => {
  const token = await intake(env, ['operator', 'token', 'alice']);
  t.is(token.code, 0, token.stderr);
  const printed = JSON.parse(token.stdout) as { name: string; token: string; suffix: string };
  t.is(printed.name, 'alice');
  t.regex(printed.token, /^itko_[A-Za-z0-9_-]{40}$/);
  t.is(printed.suffix, printed.token.slice(-5));
  const stored = await db.operatorToken.findMany();
  t.is(stored.length, 1);
  t.not(stored[0].hash, printed.token);
  t.false(stored[0].hash.includes(printed.token));
  const list = await intake(env, ['operator', 'list']);
  t.is(list.code, 0, list.stderr);
  t.deepEqual(
    JSON.parse(list.stdout).map((o: { name: string; role: string; tokens: number }) => [o.name, o.role, o.tokens]),
    [
      ['alice', 'admin', 1],
      ['bob.viewer', 'read-only', 0],
    ],
  );
  t.notRegex(list.stdout, /scrypt|itko_/);
});

test.serial('remove deletes the operator with its sessions and tokens; a second remove fails', async (t) => {
  const removed = await intake(env, ['operator', 'remove', 'alice']);
  t.is(removed.code, 0, removed.stderr);
  t.deepEqual(JSON.parse(removed.stdout), { name: 'alice', removed: true, sessionsRevoked: 0, tokensRevoked: 1 });
  t.is(await db.operatorToken.count(), 0);
  const again = await intake(env, ['operator', 'remove', 'alice']);
  t.is(again.code, 1);
  t.is(again.stderr, 'intake: operator alice does not exist\n');
  t.is(again.stdout, '');
  const token = await intake(env, ['operator', 'token', 'nobody']);
  t.is(token.code, 1);
  t.is(token.stderr, 'intake: operator nobody does not exist\n');
});

test('mistakes: one line on stderr, exit 2 for usage, 1 for the rest, nothing on stdout', async (t) => {
  const cases: [string[], string, number, RegExp][] = [
    [['operator', 'add', 'carol', '--role', 'owner', '--password-stdin'], `${PASSWORD}\n`, 2, /--role must be admin or read-only/],
    [['operator', 'add', 'carol', '--password-stdin'], `${PASSWORD}\n`, 2, /--role admin\|read-only is required/],
    [['operator', 'add', 'no spaces', '--role', 'admin', '--password-stdin'], `${PASSWORD}\n`, 2, /invalid name "no spaces"/],
    [['operator', 'add', 'carol', '--role', 'admin'], `${PASSWORD}\n`, 2, /stdin is not a terminal: give --password-stdin/],
    [['operator', 'add', 'carol', '--role', 'admin', '--password-stdin'], 'short\n', 1, /at least 12 characters/],
    [['operator', 'add', 'carol', '--role', 'admin', '--password-stdin'], '', 1, /no password on stdin/],
    [['operator', 'add', 'bob.viewer', '--role', 'admin', '--password-stdin'], `${PASSWORD}\n`, 1, /operator bob.viewer already exists/],
    [['operator', 'list', 'extra'], '', 2, /unexpected argument "extra"/],
  ];
  for (const [args, input, code, message] of cases) {
    const run = await intakeWithInput(env, args, input);
    t.is(run.code, code, `${args.join(' ')}: ${run.stderr}`);
    t.regex(run.stderr, message);
    t.is(run.stderr.trim().split('\n').length, 1, run.stderr);
    t.is(run.stdout, '');
  }
  t.is(await db.operator.count({ where: { name: 'carol' } }), 0);
  const group = await intake(env, ['operator']);
  t.is(group.code, 2);
  t.regex(group.stderr, /usage: intake operator <command>/);
});

test.serial('a password line ending in CRLF is read without its line ending', async (t) => {
  const run = await intakeWithInput(env, ['operator', 'add', 'dave', '--role', 'read-only', '--password-stdin'], `${PASSWORD}\r\nignored\n`);
  t.is(run.code, 0, run.stderr);
  const dave = await db.operator.findUniqueOrThrow({ where: { name: 'dave' } });
  t.true(await verifyPassword(PASSWORD, dave.passwordHash));
});

test('env list prints the environments of an organization, Production first', async (t) => {
  const slug = `envs-${Date.now().toString(36)}`;
  t.is((await intake(env, ['org', 'create', slug])).code, 0);
  t.is((await intake(env, ['env', 'create', slug, `${slug}_staging`, '--key', 'staging'])).code, 0);
  const listed = await intake(env, ['env', 'list', slug]);
  t.is(listed.code, 0, listed.stderr);
  t.deepEqual(
    JSON.parse(listed.stdout).map((e: { pathValue: string; key: string; production: boolean; removed: boolean }) => [
      e.pathValue,
      e.key,
      e.production,
      e.removed,
    ]),
    [
      [slug, 'prod', true, false],
      [`${slug}_staging`, 'staging', false, false],
    ],
  );
  const missing = await intake(env, ['env', 'list', 'no-such-org']);
  t.is(missing.code, 1);
  t.is(missing.stderr, 'intake: organization no-such-org does not exist\n');
});

test('on a terminal, add asks for the password twice without echoing it', async (t) => {
  // `script` runs the command on a pseudo-terminal and passes this test's writes to it as typing.
  const command = `${JSON.stringify(process.execPath)} bin/intake.js operator add erin --role read-only`;
  const child = spawn('script', ['-qec', command, '/dev/null'], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  const typed = new Set<string>();
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    for (const prompt of ['password: ', 'again: ']) {
      if (out.includes(prompt) && !typed.has(prompt)) {
        typed.add(prompt);
        child.stdin.write(`${PASSWORD}\r`);
      }
    }
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  t.is(code, 0, out);
  t.deepEqual([...typed], ['password: ', 'again: ']);
  t.false(out.includes(PASSWORD), out);
  t.regex(out, /"name":"erin","role":"read-only"/);
  const erin = await db.operator.findUniqueOrThrow({ where: { name: 'erin' } });
  t.true(await verifyPassword(PASSWORD, erin.passwordHash));
});
