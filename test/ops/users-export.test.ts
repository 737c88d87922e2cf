// intake users export: everything held about a person as one JSON document, and its memory: a
// user with 100,000 events exported by the compiled command (as the image runs it) in under
// 100 MB of RSS, measured by /usr/bin/time.
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import test from 'ava';
import pg from 'pg';
import { usersExport } from '../../cli/commands/users.ts';
import { OperatorError } from '../../operations/operator.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

const run = promisify(execFile);
const bin = path.resolve('bin/intake.js');
const out = path.resolve('.scratch', `export-test-${randomBytes(4).toString('hex')}`);

let h: Harness;
let gateway: { url: string; close(): Promise<void> };

test.before(async () => {
  h = await openHarness({ WORKER_BATCH_WAIT_MS: '2' });
  gateway = await gatewayInProcess(h, { ownPool: true });
});

test.after.always(async () => {
  rmSync(out, { recursive: true, force: true });
  await gateway?.close();
  await h?.close();
});

/** Runs usersExport in this process and parses what it wrote. */
async function exported(args: string[]) {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(Buffer.from(chunk));
      done();
    },
  });
  await usersExport({ ...h.operator, out: sink }, args);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

const identify = (tenant: Tenant, body: Record<string, unknown>) =>
  request(gateway.url, `/api/identify/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });

test.serial('the document holds the profile with its traits and their times, user IDs, addresses, consent and events, and nothing of others', async (t) => {
  const tenant = await newTenant(h, 'join-by-email');
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  const consent = [{ channel: 'email', status: 'granted', basis: 'consent', consentedAt: 1_700_000_000_000, proofRef: 'form-7' }];
  await identify(tenant, { userId: 'eve', timestamp: '2024-01-01T00:00:00Z', traits: { email: 'eve@example.com', nested: { a: [1, null] } }, consent });
  await identify(tenant, { userId: 'eve-2', timestamp: '2024-02-01T00:00:00Z', traits: { email: 'EVE@example.com', plan: 'pro' } });
  for (const [userId, event] of [
    ['eve', 'Viewed'],
    ['eve-2', 'Paid'],
    ['someone', 'Viewed'],
  ])
    await request(gateway.url, `/api/track/${tenant.slug}`, {
      headers: { 'x-api-key': tenant.key },
      body: trackBody({ userId, event, properties: { p: event } }),
    });
  await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === 3);

  const doc = await exported([tenant.slug, 'eve']);
  t.is(doc.userId, 'eve');
  t.regex(doc.userHash, /^[0-9a-f]{64}$/);
  t.deepEqual(doc.userIds, ['eve', 'eve-2']);
  t.deepEqual(doc.profile.traits, { email: 'EVE@example.com', nested: { a: [1, null] }, plan: 'pro' });
  t.deepEqual(Object.keys(doc.profile.traitWrittenAt).sort(), ['email', 'nested', 'plan']);
  t.is(doc.profile.traitWrittenAt.plan, Date.parse('2024-02-01T00:00:00Z'));
  t.deepEqual(
    doc.addresses.map((a: { value: string }) => a.value),
    ['eve@example.com'],
  );
  t.like(doc.consent[0], {
    channel: 'email',
    purpose: 'marketing',
    address: 'eve@example.com',
    status: 'granted',
    proofRef: 'form-7',
    decidedAt: 1_700_000_000_000,
  });
  t.deepEqual(doc.journeyRuns, []);
  t.deepEqual(doc.events.map((e: { event: { event: string; userId: string } }) => [e.event.userId, e.event.event]).sort(), [
    ['eve', 'Viewed'],
    ['eve-2', 'Paid'],
  ]);
  t.like(doc.events[0], { status: 'processed', error: null });

  const nobody = await exported([tenant.slug, 'nobody']);
  t.like(nobody, { userId: 'nobody', userIds: [], profile: null, addresses: [], consent: [], journeyRuns: [], events: [] });
  await t.throwsAsync(exported(['no-such-org', 'eve']), { instanceOf: OperatorError, message: 'organization no-such-org does not exist' });
  await t.throwsAsync(exported([tenant.slug, 'eve', '--env', 'nope']), {
    instanceOf: OperatorError,
    message: `environment nope does not exist in ${tenant.slug}`,
  });
});

test.serial('every spelling of a user ID that trims to the person’s is theirs: the export lists those events too', async (t) => {
  const tenant = await newTenant(h);
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  await identify(tenant, { userId: 'ex-2', traits: { name: 'Ex' } });
  for (const userId of ['ex-2', ' ex-2 ', '\u00a0ex-2\t', 'ex-22'])
    await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody({ userId, event: 'Viewed' }) });
  await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === 4);
  for (const asked of ['ex-2', '  ex-2']) {
    const doc = await exported([tenant.slug, asked]);
    t.deepEqual(doc.events.map((e: { event: { userId: string } }) => e.event.userId).sort(), [' ex-2 ', 'ex-2', '\u00a0ex-2\t'].sort(), asked);
  }
});

test.serial('a user with 100,000 events is exported by the compiled command in under 100 MB of RSS', async (t) => {
  const tenant = await newTenant(h);
  await identify(tenant, { userId: 'bulk', traits: { name: 'Bulk' } });
  // Stored directly: 100,000 Track calls would measure the gateway, not the export.
  // Its own connection: the pool's 5 s statement bound is for requests, not a 100,000-row seed.
  const seed = new pg.Client({ connectionString: h.config.databaseUrl });
  await seed.connect();
  t.teardown(() => seed.end());
  await seed.query(
    `INSERT INTO events (environment_id, message_id, message_hash, event, user_id, "timestamp", received_at, payload, status, within_limits, drives_journeys)
     SELECT $1::uuid, 'bulk-' || i, sha256(convert_to('bulk-' || i, 'UTF8')), 'Viewed', 'bulk', now(), now() + i * interval '1 ms',
            json_build_object('type', 'track', 'messageId', 'bulk-' || i, 'event', 'Viewed', 'userId', 'bulk', 'timestamp', '2024-05-01T10:00:00Z',
                              'properties', json_build_object('page', '/products/' || i, 'filler', repeat('x', 200)))::text,
            'processed', true, false
       FROM generate_series(1, 100000) AS i`,
    [tenant.environmentId],
  );
  await run(process.execPath, ['scripts/build.mjs', '--out-dir', out, '--no-check']);
  const { maxRssKb, stdout } = await new Promise<{ maxRssKb: number; stdout: Buffer }>((resolve, reject) => {
    const child = spawn('/usr/bin/time', ['-f', 'maxrss %M', process.execPath, bin, 'users', 'export', tenant.slug, 'bulk'], {
      env: { ...process.env, ...h.env, INTAKE_RUN: 'dist', INTAKE_DIST: out },
    });
    const chunks: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => {
      const m = /maxrss (\d+)/.exec(stderr);
      if (code !== 0 || !m) reject(new Error(`export exited ${code}: ${stderr}`));
      else resolve({ maxRssKb: Number(m[1]), stdout: Buffer.concat(chunks) });
    });
  });
  const doc = JSON.parse(stdout.toString('utf8'));
  t.is(doc.events.length, 100_000);
  t.is(doc.events[99_999].event.messageId, 'bulk-100000', 'in received order');
  t.deepEqual(doc.profile.traits, { name: 'Bulk' });
  t.log(`document ${(stdout.length / 1e6).toFixed(1)} MB, export RSS ${(maxRssKb / 1024).toFixed(1)} MB`);
  t.true(maxRssKb < 100 * 1024, `${maxRssKb} KB`);
});
