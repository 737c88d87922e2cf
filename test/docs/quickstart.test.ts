// The README's quick start, as a newcomer runs it on a machine where the defaults do not fit:
// other ports and another database, set once in the checkout's .env. One shell runs `npm
// start` (the way the README starts the service), the other every line of the README's
// walk-through block, read from the README, each checked against the output printed under it
// there and its duration logged (the README promises commands that answer at once); neither has
// any intake setting in its environment. `npm start`'s summary of URLs is checked too. The
// checkout is a folder of links to this one with its own .env; only the organization changes
// (a new one per run), so the walk runs beside other tests and runs again.
import { readFileSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import path from 'node:path';
import test from 'ava';
import pg from 'pg';
import { eventually } from '../helpers/eventually.ts';
import { checkout, npmStart, pattern, ROOT, shellEnvironment, walkReadme, walkThrough, writeCheckoutEnv } from '../helpers/quickstart.ts';
import { closeEmptied, openHarness, TEST_DATABASE_URL, testEnv, uniqueSlug } from '../helpers/services.ts';

test('the walk-through block reads as commands, each with the output it prints', (t) => {
  const steps = walkThrough(readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
  const commands = steps.map((s) => s.command).join('\n');
  for (const expected of [
    './intake org create acme',
    './intake key create acme',
    './intake config --get INTAKE_URL',
    '$INTAKE_URL/api/track/acme',
    './intake events get acme',
    '$INTAKE_URL/api/identify/acme',
    '$INTAKE_URL/api/profiles/acme/',
  ])
    t.true(commands.includes(expected), expected);
  t.false(/127\.0\.0\.1:\d+|localhost/.test(commands), 'no address is written into the walk-through: it comes from the settings');
  t.true(steps.filter((s) => s.expected.length > 0).length >= 5, 'most commands show their output');
  t.true(pattern('{"a":…,"b":2}').test('{"a":{"x":1},"b":2}'));
  t.false(pattern('{"a":…,"b":2}').test('{"a":1,"b":3}'));
});

test('a newcomer on other ports and another database: npm start in one shell, the walk-through in another, one .env', async (t) => {
  t.timeout(300_000);
  const dir = checkout();
  const database = new URL(TEST_DATABASE_URL);
  database.pathname = `${database.pathname}_quickstart`;
  const prefix = testEnv().QUEUE_PREFIX;
  // This checkout: other ports, another database (npm start creates it).
  const { port, dashboardPort, metricsPort } = await writeCheckoutEnv(dir, database.toString(), prefix);
  const shell = shellEnvironment();
  // The walk-through runs this checkout's code: it must rewrite nothing of the platform/generated
  // (and dist/) that other test files run.
  const generated = path.join(ROOT, 'platform/generated/prisma/enums.ts');
  const generatedBefore = statSync(generated).mtimeMs;
  const service = npmStart(dir, shell);
  const org = uniqueSlug('qs');
  try {
    t.is(await service.port, port, 'npm start listens on the PORT of .env');
    const dashboard = new RegExp(`"port":${dashboardPort}[^\\n]*"msg":"dashboard listening"`);
    t.true(await eventually(async () => dashboard.test(service.output()), { timeoutMs: 60_000 }), 'and the dashboard on its DASHBOARD_PORT');
    // Once everything listens: where each part answers, for a human, on stderr (stdout is the JSON log lines).
    const summary = [
      `gateway           http://127.0.0.1:${port}`,
      `dashboard         http://127.0.0.1:${dashboardPort}/`,
      `live view         http://127.0.0.1:${dashboardPort}/live`,
      `gateway metrics   http://127.0.0.1:${port}/metrics`,
      `worker metrics    http://127.0.0.1:${metricsPort}/metrics`,
    ];
    t.true(await eventually(async () => summary.every((line) => service.stderr().includes(line)), { timeoutMs: 30_000 }), service.stderr());
    t.false(service.stdout().includes('intake is running'), 'not on stdout');
    // Each command's duration (a bash of its own included) means little without the machine's load.
    t.log(`load average ${loadavg()[0].toFixed(1)} on ${availableParallelism()} cores`);
    if (!(await walkReadme(t, dir, shell, org))) return;
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
