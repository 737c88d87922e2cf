// The README's quick start, as a newcomer runs it on a machine where the defaults do not fit:
// other ports and another database, set once in the checkout's .env. One shell runs `npm
// start` (the way the README starts the service), the other every line of the README's
// walk-through block, read from the README, each checked against the output printed under it
// there; neither has any intake setting in its environment. The checkout is a folder of links
// to this one with its own .env; only the organization changes (a new one per run), so the
// walk runs beside other tests and runs again.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import pg from 'pg';
import { describeConfig } from '../../platform/config.ts';
import { eventually } from '../helpers/eventually.ts';
import { closeEmptied, openHarness, TEST_DATABASE_URL, TEST_REDIS_URL, testEnv, uniqueSlug } from '../helpers/services.ts';
import { freePort } from '../helpers/free-port.ts';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MARKER = '<!-- quickstart:';
const README_ORG = /\bacme\b/g;
/** What a checkout of the project holds besides its own .env (and what git ignores or never runs). */
const NOT_LINKED = new Set(['.env', '.git', '.scratch', 'test-results']);

interface Step {
  command: string;
  expected: string[];
}

/** The walk-through: the console block after the marker, `$ command` lines and the output under each. */
function walkThrough(readme: string): Step[] {
  const at = readme.indexOf(MARKER);
  if (at < 0) throw new Error(`README.md has no ${MARKER} marker`);
  const block = /```console\n([\s\S]*?)\n```/.exec(readme.slice(at));
  if (!block) throw new Error('no ```console block after the quick-start marker');
  const steps: Step[] = [];
  for (const line of block[1].split('\n')) {
    if (line.startsWith('$ ')) steps.push({ command: line.slice(2), expected: [] });
    else if (steps.length) steps[steps.length - 1].expected.push(line);
    else throw new Error(`output before any command: ${line}`);
  }
  return steps;
}

const quoted = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;

/** An expected line as a pattern: `…` stands for anything. */
const pattern = (line: string) =>
  new RegExp(
    `^${line
      .split('…')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*?')}$`,
  );

function matches(expected: string[], stdout: string): boolean {
  const text = stdout.replace(/\n$/, '');
  const lines = text === '' ? [] : text.split('\n');
  return lines.length === expected.length && expected.every((e, i) => pattern(e).test(lines[i]));
}

/** `npm start` in `cwd`, resolving with the gateway's port once it listens. */
function npmStart(cwd: string, env: NodeJS.ProcessEnv) {
  const child = spawn('npm', ['start'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  const port = new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start did not listen within 120 s:\n${out}`)), 120_000);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const listening = /"port":(\d+)[^\n]*"msg":"gateway listening"/.exec(out);
      if (!listening) return;
      clearTimeout(timer);
      resolve(Number(listening[1]));
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`npm start exited:\n${out}`));
    });
  });
  return { port, exited, output: () => out, stop: () => (child.exitCode === null && child.signalCode === null && child.kill('SIGTERM'), exited) };
}

test('the walk-through block reads as commands, each with the output it prints', (t) => {
  const steps = walkThrough(readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
  const commands = steps.map((s) => s.command).join('\n');
  for (const expected of [
    'npx intake org create acme',
    'npx intake key create acme',
    'npx intake config --get INTAKE_URL',
    '$INTAKE_URL/api/track/acme',
    'npx intake events get acme',
    '$INTAKE_URL/api/identify/acme',
    '$INTAKE_URL/api/profiles/acme/',
  ])
    t.true(commands.includes(expected), expected);
  t.false(/127\.0\.0\.1:\d+|localhost/.test(commands), 'no address is written into the walk-through: it comes from the settings');
  t.true(steps.filter((s) => s.expected.length > 0).length >= 5, 'most commands show their output');
  t.true(pattern('{"a":…,"b":2}').test('{"a":{"x":1},"b":2}'));
  t.false(pattern('{"a":…,"b":2}').test('{"a":1,"b":3}'));
});

/** A checkout of its own: links to this one's files, and room for its own .env. */
function checkout(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'intake-checkout-'));
  for (const name of readdirSync(ROOT)) if (!NOT_LINKED.has(name)) symlinkSync(path.join(ROOT, name), path.join(dir, name));
  return dir;
}

/** A shell's environment with no intake setting in it: they come from the checkout's .env only. */
function shellEnvironment(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const { env: name } of describeConfig()) delete env[name];
  for (const name of ['TEST_DATABASE_URL', 'TEST_REDIS_URL']) delete env[name];
  // Nor what npm tells the scripts it runs (npm test, npx -p node@24 …): a newcomer's shell has none of it.
  for (const name of Object.keys(env)) if (/^npm_/i.test(name)) delete env[name];
  return env;
}

test('a newcomer on other ports and another database: npm start in one shell, the walk-through in another, one .env', async (t) => {
  t.timeout(300_000);
  const dir = checkout();
  const [port, dashboardPort] = [await freePort(), await freePort()];
  const database = new URL(TEST_DATABASE_URL);
  database.pathname = `${database.pathname}_quickstart`;
  const prefix = testEnv().QUEUE_PREFIX;
  writeFileSync(
    path.join(dir, '.env'),
    [
      '# This checkout: other ports, another database (npm start creates it).',
      `PORT=${port}`,
      `DASHBOARD_PORT=${dashboardPort}`,
      `DATABASE_URL=${database}`,
      `REDIS_URL=${TEST_REDIS_URL}`,
      `QUEUE_PREFIX=${prefix}`,
      'HOST=127.0.0.1',
      'LOG_LEVEL=info',
      '',
    ].join('\n'),
  );
  const shell = shellEnvironment();
  // `npx intake` installs this checkout into npx's cache, which runs its postinstall there: it
  // must leave the checkout's platform/generated (and dist/), which other test files run, alone.
  const generated = path.join(ROOT, 'platform/generated/prisma/enums.ts');
  const generatedBefore = statSync(generated).mtimeMs;
  const service = npmStart(dir, shell);
  const state = path.join(dir, '.shell-state');
  writeFileSync(state, '');
  const org = uniqueSlug('qs');
  try {
    t.is(await service.port, port, 'npm start listens on the PORT of .env');
    const dashboard = new RegExp(`"port":${dashboardPort}[^\\n]*"msg":"dashboard listening"`);
    t.true(await eventually(async () => dashboard.test(service.output()), { timeoutMs: 60_000 }), 'and the dashboard on its DASHBOARD_PORT');
    const local = (text: string) => text.replace(README_ORG, org);
    for (const step of walkThrough(readFileSync(path.join(ROOT, 'README.md'), 'utf8'))) {
      const command = local(step.command);
      const expected = step.expected.map(local);
      // One shell per command, as typed one after another: what a command exports (the API key,
      // the gateway's URL) is there for the next ones.
      const script = `set -a\n. ${quoted(state)}\n${command}\nstatus=$?\nexport -p > ${quoted(state)}\nexit $status\n`;
      const deadline = Date.now() + 60_000;
      for (;;) {
        const result = await run('bash', ['-c', script], { cwd: dir, env: shell, maxBuffer: 16 << 20 }).then(
          (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
          (e: { code: number; stdout: string; stderr: string }) => e,
        );
        if (result.code === 0 && matches(expected, result.stdout)) break;
        // The README: an event is "status":"pending" until a worker has stored it, run `events get` again.
        const pending = result.code === 0 && result.stdout.includes('"status":"pending"');
        if (!pending || Date.now() > deadline) {
          t.fail(`$ ${command}\nexit ${result.code}\nprinted:\n${result.stdout}\nexpected:\n${expected.join('\n')}\nstderr:\n${result.stderr}`);
          return;
        }
        await new Promise((r) => setTimeout(r, 500));
      }
      t.pass(step.command.slice(0, 60));
    }
    t.is(statSync(generated).mtimeMs, generatedBefore, 'the walk-through rewrote nothing of the platform/generated that other test files run');
    // The second shell's commands went to the database of .env, not the default one.
    const client = new pg.Client({ connectionString: database.toString() });
    await client.connect();
    const found = await client.query('SELECT slug FROM organizations WHERE slug = $1', [org]);
    await client.end();
    t.is(found.rowCount, 1, `the organization is in ${database.pathname.slice(1)}`);
  } finally {
    t.is(await service.stop(), 0, `npm start exits 0 on SIGTERM:\n${service.output().slice(-2000)}`);
    rmSync(dir, { recursive: true, force: true });
    await closeEmptied(await openHarness({ QUEUE_PREFIX: prefix }));
  }
});
