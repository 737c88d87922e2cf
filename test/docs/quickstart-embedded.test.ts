// The README's quick start on a machine without a PostgreSQL server: the checkout's .env says
// DATABASE_URL=embedded, `npm start` runs the embedded PostgreSQL (data in the checkout's
// .intake/postgres), and the walk-through, run in another shell of the same folder, reaches that
// same database through it; so does any operator command. Stopping `npm start` stops the server
// and keeps its data. Redis is the machine's (test/ops/local-services.test.ts starts one of the
// checkout's own).
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import pg from 'pg';
import { closeEmptied, openHarness, testEnv, uniqueSlug } from '../helpers/services.ts';
import { checkout, npmStart, shellEnvironment, walkReadme, writeCheckoutEnv } from '../helpers/quickstart.ts';
import { isAlive } from '../../cli/local-services/shared.ts';

const run = promisify(execFile);

/** The embedded server's pid and port, from the postmaster.pid PostgreSQL keeps in its data folder. */
function postmaster(dir: string): { pid: number; port: number } | null {
  const file = path.join(dir, '.intake/postgres/data/postmaster.pid');
  if (!existsSync(file)) return null;
  const lines = readFileSync(file, 'utf8').split('\n');
  return { pid: Number(lines[0]), port: Number(lines[3]) };
}

test('DATABASE_URL=embedded: npm start runs the embedded PostgreSQL, and the walk-through and operator commands of the same folder reach it', async (t) => {
  t.timeout(300_000);
  const dir = checkout();
  // Under root the server runs as the user postgres, who must be able to enter the checkout.
  chmodSync(dir, 0o755);
  const prefix = testEnv().QUEUE_PREFIX;
  const { port, dashboardPort, metricsPort } = await writeCheckoutEnv(dir, 'embedded', prefix);
  const shell = shellEnvironment();
  const service = npmStart(dir, shell);
  const org = uniqueSlug('qse');
  const other = uniqueSlug('qse');
  let server: { pid: number; port: number } | null = null;
  try {
    t.is(await service.port, port, `npm start listens on the PORT of .env:\n${service.stderr()}`);
    server = postmaster(dir);
    t.truthy(server, 'the embedded PostgreSQL keeps its data in the checkout');
    t.regex(
      service.stderr(),
      new RegExp(
        `^intake: DATABASE_URL=embedded: started the embedded PostgreSQL \\d+\\.\\d+ on 127\\.0\\.0\\.1:${server!.port} \\(data in \\.intake/postgres; [^\\n]*\\)$`,
        'm',
      ),
      'and says so in one line',
    );
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    t.is(ready.status, 200, await ready.text());

    t.log(`load average ${loadavg()[0].toFixed(1)} on ${availableParallelism()} cores`);
    if (!(await walkReadme(t, dir, shell, org))) return;

    // An operator command, as node runs it, with nothing but the folder's .env: the same database.
    const created = await run(process.execPath, ['bin/intake.js', 'org', 'create', other], { cwd: dir, env: shell });
    t.is(created.stdout, `{"slug":"${other}","features":[]}\n`);
    t.is(created.stderr, '', 'joining the running server says nothing');
    const client = new pg.Client({ connectionString: `postgresql://postgres@127.0.0.1:${server!.port}/intake` });
    await client.connect();
    const found = await client.query('SELECT slug FROM organizations WHERE slug = ANY($1) ORDER BY slug', [[org, other]]);
    await client.end();
    t.deepEqual(
      found.rows.map((r) => r.slug),
      [org, other].sort(),
      'both organizations are in the embedded database',
    );
  } finally {
    t.is(await service.stop(), 0, `npm start exits 0 on SIGTERM:\n${service.output().slice(-2000)}`);
    if (server) t.false(isAlive(server.pid), 'the embedded PostgreSQL stopped with npm start');
    t.true(existsSync(path.join(dir, '.intake/postgres/data/PG_VERSION')), 'its data is kept');
    rmSync(dir, { recursive: true, force: true });
    await closeEmptied(await openHarness({ QUEUE_PREFIX: prefix }));
  }
});
