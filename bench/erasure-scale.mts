// `node --import tsx bench/erasure-scale.mts`: how long `intake users forget` takes for a user
// with 10,000 events among 5,000,000 stored in the same environment (and 1,000 Identify records
// among 1,000,000), with the events layout's index on user_id and without it. The
// database (BENCH_ERASURE_DATABASE_URL, default intake_bench_erasure) is created and seeded on
// the first run (a few minutes) and kept; each measurement puts the user's rows back first.
// Prints one JSON line per measurement.
import pg from 'pg';
import { loadConfig } from '../platform/config.ts';
import { createDb, poolOf } from '../platform/db.ts';
import { userKeyBits } from '../privacy/rules.ts';
import { userHashOf } from '../profiles/person.ts';
import { migrate } from '../cli/migrate.ts';
import { forgetUser } from '../privacy/erasure.ts';
import { readAuditSecret } from '../privacy/audit.ts';
import { createPartitionsFor } from '../events/storage.ts';

const DATABASE_URL = process.env.BENCH_ERASURE_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_bench_erasure';
const EVENTS = 5_000_000;
const USER_EVENTS = 10_000;
const RECORDS = 1_000_000;
const TARGET = 'erasure-target';

await migrate(DATABASE_URL);
const admin = new pg.Client({ connectionString: DATABASE_URL });
await admin.connect();
const say = (what: string) => console.error(`${new Date().toISOString()} ${what}`);

let env = (await admin.query<{ id: string }>(`SELECT id FROM environments WHERE path_value = 'erasure-bench'`)).rows[0]?.id;
if (!env) {
  const org = (await admin.query<{ id: string }>(`INSERT INTO organizations (id, slug) VALUES (gen_random_uuid(), 'erasure-bench') RETURNING id`)).rows[0].id;
  env = (
    await admin.query<{ id: string }>(
      `INSERT INTO environments (id, organization_id, path_value, environment_key, is_production) VALUES (gen_random_uuid(), $1, 'erasure-bench', 'prod', true) RETURNING id`,
      [org],
    )
  ).rows[0].id;
}
// The seed spreads events over the last ~2 hours: their day partitions must exist.
{
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  await createPartitionsFor(pool, Date.now() - 3 * 3_600_000, Date.now() + 3_600_000);
  await pool.end();
}
const stored = Number((await admin.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE environment_id = $1`, [env])).rows[0].n);
if (stored < EVENTS - USER_EVENTS) {
  say(`seeding ${EVENTS - USER_EVENTS} events of 100,000 other users and ${RECORDS} Identify records`);
  const step = 500_000;
  for (let from = stored; from < EVENTS - USER_EVENTS; from += step) {
    await admin.query(
      `INSERT INTO events (environment_id, message_id, message_hash, event, user_id, "timestamp", received_at, payload, status, within_limits, drives_journeys)
       SELECT $1::uuid, 'o-' || i, sha256(convert_to('o-' || i, 'UTF8')), 'Viewed', 'user-' || (i % 100000), now(), now() - i * interval '1 ms',
              '{"type":"track","messageId":"o-' || i || '","event":"Viewed","userId":"user-' || (i % 100000) || '","properties":{"page":"/p/' || i || '"}}',
              'processed', true, false
         FROM generate_series($2::int, $3::int) AS i`,
      [env, from, Math.min(from + step, EVENTS - USER_EVENTS) - 1],
    );
    say(`  ${Math.min(from + step, EVENTS - USER_EVENTS)} events`);
  }
  await admin.query(
    `INSERT INTO identify_messages (environment_id, message_key, call_digest, user_key)
     SELECT $1::uuid, gen_random_uuid(), i, (i % 100000) FROM generate_series(1, $2::int) AS i ON CONFLICT DO NOTHING`,
    [env, RECORDS],
  );
  await admin.query('VACUUM ANALYZE events');
  await admin.query('VACUUM ANALYZE identify_messages');
}

/** The user's rows put back: 10,000 events spread over the table's time range, 1,000 Identify records, a profile. */
async function seedTarget() {
  await admin.query(
    `INSERT INTO events (environment_id, message_id, message_hash, event, user_id, "timestamp", received_at, payload, status, within_limits, drives_journeys)
     SELECT $1::uuid, 't-' || i, sha256(convert_to('t-' || i, 'UTF8')), 'Viewed', $2, now(), now() - (i * 500) * interval '1 ms',
            '{"type":"track","messageId":"t-' || i || '","event":"Viewed","userId":"${TARGET}"}', 'processed', true, false
       FROM generate_series(1, $3::int) AS i ON CONFLICT DO NOTHING`,
    [env, TARGET, USER_EVENTS],
  );
  await admin.query(
    `INSERT INTO identify_messages (environment_id, message_key, call_digest, user_key)
     SELECT $1::uuid, gen_random_uuid(), i, $2::int8 FROM generate_series(1, 1000) AS i`,
    [env, userKeyBits(userHashOf(TARGET).toString('hex'))],
  );
  const profile = (
    await admin.query<{ id: string }>(
      `INSERT INTO profiles (id, environment_id, fields, trait_times, updated_at) VALUES (gen_random_uuid(), $1, '{"name":"T"}', '{"name":0}', now()) RETURNING id`,
      [env],
    )
  ).rows[0].id;
  await admin.query(`INSERT INTO profile_users (environment_id, user_id, user_hash, profile_id) VALUES ($1, $2, $3, $4)`, [
    env,
    TARGET,
    userHashOf(TARGET),
    profile,
  ]);
  await admin.query('ANALYZE events');
}

const db = createDb(loadConfig({ ...process.env, DATABASE_URL, DATABASE_POOL_SIZE: '2' }));
async function measure(layout: string) {
  await seedTarget();
  const started = performance.now();
  const summary = await forgetUser(poolOf(db), {
    environmentId: env!,
    userId: TARGET,
    suppress: false,
    operator: 'bench',
    auditSecret: await readAuditSecret(poolOf(db)),
  });
  const seconds = (performance.now() - started) / 1000;
  console.log(JSON.stringify({ layout, events: EVENTS, removed: summary.removed, seconds: Number(seconds.toFixed(2)) }));
}

// The layout's own index (prisma/migrations: events_user_id_idx, a hash index on user_id).
await measure('the events layout: hash index on user_id');
await measure('the events layout: hash index on user_id, again');
if (!process.argv.includes('--indexed-only')) {
  await admin.query('DROP INDEX events_user_id_idx');
  try {
    await measure('without the index on user_id: a scan of the environment');
  } finally {
    say('putting the index back');
    await admin.query('CREATE INDEX events_user_id_idx ON events USING HASH (user_id)');
  }
}
await db.$disconnect();
await admin.end();
