// The compiled build, run as the image runs it. `npm run build`'s script compiles into a folder
// of this file's own (a developer's dist/ is left alone), then bin/intake.js runs it with
// INTAKE_RUN=dist (the build or a refusal: never the sources, never a stale build): migrate
// into a new database, operator commands, a gateway and a worker over real HTTP, PostgreSQL and
// Redis. The rest of the suite runs the sources (package.json "ava": INTAKE_RUN=sources).
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import pg from 'pg';
import { STAMP_FILE, sourceDigest } from '../../bin/sources.js';
import { createDb } from '../../platform/db.ts';
import { execForm, readDockerfile } from '../helpers/dockerfile.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { spawnIntake, type Child } from '../helpers/processes.ts';
import { TEST_DATABASE_URL, testConfig, testEnv } from '../helpers/services.ts';

const run = promisify(execFile);
const bin = path.resolve('bin/intake.js');
const out = path.resolve('.scratch', `dist-test-${randomBytes(4).toString('hex')}`);
const databaseUrl = `${TEST_DATABASE_URL}_dist`;
const env = { ...testEnv({ DATABASE_URL: databaseUrl }), INTAKE_RUN: 'dist', INTAKE_DIST: out };
let buildSeconds = 0;

/** `intake <args>` from the build: exit code, stdout, stderr. */
async function intake(...args: string[]) {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { env: { ...process.env, ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test.before(async () => {
  const started = Date.now();
  // Emit only: `npm test` type-checks everything first (tsc --noEmit), and checking again would double the time.
  await run(process.execPath, ['scripts/build.mjs', '--out-dir', out, '--no-check']);
  buildSeconds = (Date.now() - started) / 1000;
  // A database of its own, dropped first, so the compiled migrate has every migration to apply.
  const admin = new pg.Client({ connectionString: Object.assign(new URL(databaseUrl), { pathname: '/postgres' }).toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${new URL(databaseUrl).pathname.slice(1)}" WITH (FORCE)`);
  await admin.end();
});
test.after.always(() => rmSync(out, { recursive: true, force: true }));

test.serial('the build is JavaScript only, with relative imports rewritten, no tests, and stamped with the digest of these sources', (t) => {
  t.log(`build (tsc --noCheck) took ${buildSeconds.toFixed(1)} s`);
  const files = readdirSync(out, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(out, path.join(e.parentPath, e.name)));
  for (const needed of ['cli/intake.js', 'platform/json-pool-loop.js', 'platform/generated/prisma/client.js', 'clients/typescript/src/index.js']) {
    t.true(files.includes(needed), needed);
  }
  t.deepEqual(
    files.filter((f) => !f.endsWith('.js') && f !== STAMP_FILE),
    [],
  );
  t.false(
    files.some((f) => /^(test|bench|scripts)\//.test(f)),
    'test/, bench/ and scripts/ are not compiled',
  );
  const tsImports = files
    .filter((f) => f.endsWith('.js'))
    .flatMap((f) => [...readFileSync(path.join(out, f), 'utf8').matchAll(/(?:from\s+|import\()\s*['"](\.{1,2}\/[^'"]+\.ts)['"]/g)].map((m) => `${f}: ${m[1]}`));
  t.deepEqual(tsImports, []);
  t.is(JSON.parse(readFileSync(path.join(out, STAMP_FILE), 'utf8')).digest, sourceDigest(process.cwd()));
});

test.serial('compiled: migrate, operator commands, a gateway taking Track and Identify, a worker storing the Track', async (t) => {
  const migrated = await intake('migrate');
  t.is(migrated.code, 0, migrated.stderr);
  const migrations = readdirSync('prisma/migrations', { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  t.deepEqual(JSON.parse(migrated.stdout), { createdDatabase: true, applied: migrations }, 'prisma/migrations found from the build');

  const slug = `dist-${randomBytes(4).toString('hex')}`;
  t.is((await intake('org', 'create', slug)).code, 0);
  const created = await intake('key', 'create', slug);
  t.is(created.code, 0, created.stderr);
  const { key } = JSON.parse(created.stdout) as { key: string };

  const children: Child[] = [];
  const db = createDb(testConfig(env));
  try {
    children.push(await spawnIntake('gateway', env), await spawnIntake('worker', env));
    const gateway = children[0]!;
    const headers = { 'x-api-key': key };
    // Over 16 KB: decoded on a thread of the JSON pool, whose entry the build resolves by itself.
    const track = trackBody({ properties: { note: 'x'.repeat(20_000) } });
    t.is((await request(gateway.url, `/api/track/${slug}`, { headers, body: track })).status, 202);
    const identify = await request(gateway.url, `/api/identify/${slug}`, { headers, body: { userId: 'user-1', traits: { email: 'ann@example.com' } } });
    t.is(identify.status, 200, identify.text);

    t.true(
      await eventually(async () => (await db.event.count({ where: { messageId: track.messageId as string } })) === 1),
      'the compiled worker stored the Track',
    );
    const stored = await intake('events', 'get', slug, track.messageId as string);
    t.is(stored.code, 0, stored.stderr);
    t.like(JSON.parse(stored.stdout), { messageId: track.messageId, status: 'processed', event: { properties: { note: 'x'.repeat(20_000) } } });
    const profile = await request(gateway.url, `/api/profiles/${slug}/user-1`, { method: 'GET', headers });
    t.like(profile.json, { fields: { email: 'ann@example.com' } });

    // The image's HEALTHCHECK, as Docker would run it in the gateway's container.
    const [command, ...args] = execForm(
      readDockerfile('Dockerfile')
        .at(-1)!
        .instructions.find((i) => i.keyword === 'HEALTHCHECK')!,
    );
    const port = new URL(gateway.url).port;
    t.is(await exitCode(command!, args, { PORT: port }), 0, 'healthy while the gateway is ready');
    t.is(await gateway.kill('SIGTERM'), 0, 'the compiled gateway drains and exits on SIGTERM');
    t.is(await exitCode(command!, args, { PORT: port }), 1, 'unhealthy once it is gone');
    t.is(await children[1]!.kill('SIGTERM'), 0, 'the compiled worker too');
  } finally {
    await Promise.all(children.map((c) => c.kill('SIGKILL')));
    await db.$disconnect();
  }
});

test.serial('a usage mistake from the build is the same one line and exit 2', async (t) => {
  const usage = await intake('key', 'list');
  t.is(usage.code, 2);
  t.regex(usage.stderr, /^intake: .*\n$/);
});

function exitCode(command: string, args: string[], extra: Record<string, string>): Promise<number | null> {
  return new Promise((resolve) => spawn(command, args, { env: { ...process.env, ...extra }, stdio: 'ignore' }).once('exit', resolve));
}
