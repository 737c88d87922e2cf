// The data bench/console-scale.mts measures the console on: 10,000,000 stored events and
// 1,000,000 profiles over four environments, written in SQL (INSERT … SELECT generate_series)
// into a database of its own, migrated with the project's migrations. Each step is recorded in
// the table bench_seed once done, so a second run reuses what is there and an interrupted one
// goes on where it stopped.
//
// The shape: 30 days of events (one partition a day), ~50 event names with a few frequent ones,
// 90 % of events from identified users (~9 each, spread over the 30 days), 10 % anonymous-only;
// ten heavy users (~600 events each in the largest environment) and one whale (12,000); 2 %
// failed. Every user has a profile (traits and their write times, an email); one in twenty has a
// second, joined user ID; one in ten claimed its email, one in twenty a phone too, with consent
// decisions; one in ten has a journey run, one in twenty a message sent by it.
import pg from 'pg';
import { migrate } from '../cli/migrate.ts';
import { createPartitionsFor } from '../events/storage.ts';

export interface BenchEnvironment {
  /** Path value (Production's is the organization's slug). */
  path: string;
  org: string;
  key: string;
  events: number;
  profiles: number;
}

export const ENVIRONMENTS: BenchEnvironment[] = [
  { path: 'acme', org: 'acme', key: 'prod', events: 6_000_000, profiles: 600_000 },
  { path: 'acme-staging', org: 'acme', key: 'staging', events: 1_000_000, profiles: 100_000 },
  { path: 'globex', org: 'globex', key: 'prod', events: 2_000_000, profiles: 200_000 },
  { path: 'initech', org: 'initech', key: 'prod', events: 1_000_000, profiles: 100_000 },
];

/** The events span DAYS days ending at the seed's time. */
export const DAYS = 30;

export const EVENT_NAMES = [
  'Page Viewed',
  'Product Viewed',
  'Product List Viewed',
  'Product Clicked',
  'Products Searched',
  'Product Added',
  'Cart Viewed',
  'Product Removed',
  'Checkout Started',
  'Checkout Step Viewed',
  'Checkout Step Completed',
  'Payment Info Entered',
  'Order Completed',
  'Order Updated',
  'Order Refunded',
  'Order Cancelled',
  'Coupon Entered',
  'Coupon Applied',
  'Coupon Denied',
  'Promotion Viewed',
  'Promotion Clicked',
  'Wishlist Product Added',
  'Wishlist Product Removed',
  'Product Shared',
  'Product Reviewed',
  'Signed Up',
  'Signed In',
  'Signed Out',
  'Password Reset',
  'Account Deleted',
  'Invite Sent',
  'Trial Started',
  'Trial Ended',
  'Subscription Started',
  'Subscription Cancelled',
  'Plan Changed',
  'Invoice Paid',
  'Invoice Failed',
  'Feature Used',
  'Report Exported',
  'Dashboard Viewed',
  'Setting Changed',
  'File Uploaded',
  'Message Sent',
  'Notification Opened',
  'Email Opened',
  'Email Clicked',
  'Push Opened',
  'Video Played',
  'Application Opened',
];

const say = (what: string) => console.error(`${new Date().toISOString()} ${what}`);

/** Rows one INSERT writes. */
const BATCH = 250_000;

/** Creates (or finds) the seeded database; returns each environment's id. */
export async function seed(url: string, scale = 1): Promise<Map<string, string>> {
  const sized = ENVIRONMENTS.map((e) => ({ ...e, events: Math.round(e.events * scale), profiles: Math.round(e.profiles * scale) }));
  await migrate(url);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('SET synchronous_commit = off');
    await c.query(`CREATE TABLE IF NOT EXISTS bench_seed (step text PRIMARY KEY, value text NOT NULL, at timestamptz NOT NULL DEFAULT now())`);
    const done = async (step: string) => (await c.query(`SELECT value FROM bench_seed WHERE step = $1`, [step])).rows[0]?.value as string | undefined;
    const mark = (step: string, value = '') =>
      c.query(`INSERT INTO bench_seed (step, value) VALUES ($1, $2) ON CONFLICT (step) DO UPDATE SET value = $2`, [step, value]);
    const step = async (name: string, work: () => Promise<unknown>) => {
      if (await done(name)) return;
      const started = performance.now();
      await work();
      await mark(name, 'done');
      say(`  ${name}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
    };

    // The seed's end time, kept: a later run reuses the same days.
    let end = Number(await done('end'));
    if (!end) {
      end = Date.now();
      await mark('end', String(end));
    }
    const start = end - DAYS * 86_400_000;
    {
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      await createPartitionsFor(pool, start - 86_400_000, end + 86_400_000);
      await pool.end();
    }

    const ids = new Map<string, string>();
    for (const e of ENVIRONMENTS) {
      await c.query(`INSERT INTO organizations (id, slug) VALUES (gen_random_uuid(), $1) ON CONFLICT (slug) DO NOTHING`, [e.org]);
      await c.query(
        `INSERT INTO environments (id, organization_id, path_value, environment_key, is_production)
         SELECT gen_random_uuid(), o.id, $2, $3, $3 = 'prod' FROM organizations o WHERE o.slug = $1 ON CONFLICT (path_value) DO NOTHING`,
        [e.org, e.path, e.key],
      );
      ids.set(e.path, (await c.query(`SELECT id::text FROM environments WHERE path_value = $1`, [e.path])).rows[0].id);
    }
    // Three keys per environment (one revoked) for the keys page and the admin API's list.
    await step('api_keys', () =>
      c.query(
        `INSERT INTO api_keys (id, environment_id, hash, suffix, status, revoked_at)
         SELECT gen_random_uuid(), e.id, encode(sha256(convert_to(e.path_value || k, 'UTF8')), 'hex'), substr(md5(e.path_value || k), 1, 5),
                CASE WHEN k = 1 THEN 'revoked' ELSE 'active' END, CASE WHEN k = 1 THEN now() END
           FROM environments e, generate_series(1, 3) AS k`,
      ),
    );
    if (await done('complete')) return ids;
    say(
      `seeding ${sized.reduce((n, e) => n + e.events, 0).toLocaleString('en')} events and ${sized.reduce((n, e) => n + e.profiles, 0).toLocaleString('en')} profiles`,
    );

    for (const [n, e] of sized.entries()) {
      const env = ids.get(e.path)!;
      const spacing = (end - start) / e.events;
      for (let from = 0; from < e.events; from += BATCH) {
        const to = Math.min(from + BATCH, e.events) - 1;
        await step(`events ${e.path} ${from}`, () =>
          // Event i of the environment: received at start + i·spacing (ascending: each day's
          // partition is written in order); its user is a multiplicative hash of i, so a user's
          // events spread over the days.
          c.query(
            `WITH src AS (
               SELECT i, 'm-${n}-' || i AS mid,
                      to_timestamp(($2::float8 + i * $3::float8) / 1000) AS at,
                      $5::text[] AS names,
                      1 + floor(50 * power(random(), 2.5))::int AS nx,
                      CASE WHEN i % 500 = 3 THEN 'whale'
                           WHEN i % 1000 = 1 THEN 'heavy-' || (i / 1000 % 10)
                           WHEN i % 10 = 9 THEN NULL
                           ELSE 'user-' || ((i::int8 * 2654435761) % $4::int8) END AS uid,
                      random() < 0.02 AS failed
                 FROM generate_series($6::int, $7::int) AS i
             ), rows AS (
               SELECT mid, at, names[nx] AS name, uid,
                      CASE WHEN uid IS NULL THEN 'anon-' || ((i::int8 * 40503) % ($4::int8 / 2)) ELSE 'a-' || uid END AS anon,
                      failed
                 FROM src
             ), ins AS (
               INSERT INTO events (environment_id, message_id, message_hash, event, user_id, anonymous_id, "timestamp", received_at, payload,
                                   status, within_limits, drives_journeys, error, processed_at, journeys_at, journey_user)
               SELECT $1::uuid, mid, sha256(convert_to(mid, 'UTF8')), name, uid, anon, at - interval '120 ms', at,
                      '{"type":"track","event":"' || name || '","messageId":"' || mid || '",' ||
                        CASE WHEN uid IS NULL THEN '' ELSE '"userId":"' || uid || '",' END ||
                        '"anonymousId":"' || anon || '","properties":{"path":"/p/' || (abs(hashtext(mid)) % 5000) || '","value":' || (abs(hashtext(mid)) % 997) ||
                        ',"currency":"EUR"},"context":{"library":{"name":"analytics.js","version":"2.1.0"},"locale":"en-GB"},"timestamp":"' ||
                        to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"}',
                      CASE WHEN failed THEN 'failed' ELSE 'processed' END, true, uid IS NOT NULL,
                      CASE WHEN failed THEN 'profile write failed: could not serialize access due to concurrent update' END,
                      at + interval '40 ms',
                      CASE WHEN uid IS NOT NULL AND name IN ('Order Completed', 'Checkout Started', 'Signed Up') THEN at + interval '60 ms' END,
                      CASE WHEN uid IS NOT NULL AND name IN ('Order Completed', 'Checkout Started', 'Signed Up') THEN uid END
                 FROM rows
               RETURNING environment_id, message_hash, received_at
             )
             INSERT INTO event_ids (environment_id, message_hash, received_at) SELECT environment_id, message_hash, received_at FROM ins`,
            [env, start, spacing, e.profiles, EVENT_NAMES, from, to],
          ),
        );
      }

      // Profiles: one per user, its id derived from the user (md5 → uuid) so the rows below can name it.
      const pid = (u: string) => `md5('${n}-' || ${u})::uuid`;
      await step(`profiles ${e.path}`, () =>
        c.query(
          `INSERT INTO profiles (id, environment_id, fields, trait_times, email, updated_at, created_at)
           SELECT ${pid('uid')}, $1::uuid,
                  '{"email":"' || uid || '@example.com","name":"Person ' || u || '","plan":"' || (ARRAY['free','pro','team'])[1 + abs(u) % 3] ||
                    '","country":"' || (ARRAY['DE','FR','GB','US','NL','ES'])[1 + abs(u) % 6] || '","logins":' || (abs(u) % 97) ||
                    ',"company":{"name":"Company ' || (u % 5000) || '","size":' || (u % 500) || '}}',
                  '{"email":' || t || ',"name":' || t || ',"plan":' || (t + 3600000) || ',"country":' || t || ',"logins":' || (t + 7200000) || ',"company":' || t || '}',
                  uid || '@example.com', to_timestamp((t + 7200000) / 1000.0), to_timestamp(t / 1000.0)
             FROM (SELECT u, CASE WHEN u < 0 THEN 'whale' ELSE 'user-' || u END AS uid, ($2::int8 + (u::int8 * 2591) % ($3::int8 - $2::int8)) AS t
                     FROM generate_series(-1, $4::int - 1) AS u
                   UNION ALL SELECT 0, 'heavy-' || h, $2::int8 FROM generate_series(0, 9) AS h) p`,
          [env, start, end, e.profiles],
        ),
      );
      await step(`profile_users ${e.path}`, () =>
        c.query(
          `INSERT INTO profile_users (environment_id, user_id, user_hash, profile_id, created_at)
           SELECT $1::uuid, id, sha256(convert_to(id, 'UTF8')), ${pid('owner')}, now() - interval '40 days' + (k * interval '1 day')
             FROM (SELECT CASE WHEN u < 0 THEN 'whale' ELSE 'user-' || u END AS owner, CASE WHEN u < 0 THEN 'whale' ELSE 'user-' || u END AS id, 0 AS k
                     FROM generate_series(-1, $2::int - 1) AS u
                   UNION ALL SELECT 'heavy-' || h, 'heavy-' || h, 0 FROM generate_series(0, 9) AS h
                   -- One user in twenty joined a second user ID (by email).
                   UNION ALL SELECT 'user-' || u, 'legacy-' || u, 1 FROM generate_series(0, $2::int - 1, 20) AS u
                   UNION ALL SELECT 'whale', 'whale-old', 1) x`,
          [env, e.profiles],
        ),
      );
      await step(`address_claims ${e.path}`, () =>
        c.query(
          `INSERT INTO address_claims (profile_id, channel, value, at)
           SELECT ${pid('uid')}, channel, value, $1::int8 + (u::int8 * 7919) % ($2::int8 - $1::int8)
             FROM (SELECT u, 'user-' || u AS uid, 'email' AS channel, 'user-' || u || '@example.com' AS value FROM generate_series(0, $3::int - 1, 10) AS u
                   UNION ALL SELECT u, 'user-' || u, 'sms', '+4915' || lpad(u::text, 9, '0') FROM generate_series(0, $3::int - 1, 20) AS u
                   UNION ALL SELECT -1, 'whale', 'email', 'whale@example.com'
                   UNION ALL SELECT -1, 'whale', 'sms', '+491500000001') x`,
          [start, end, e.profiles],
        ),
      );
      await step(`consent_decisions ${e.path}`, () =>
        c.query(
          `INSERT INTO consent_decisions (environment_id, channel, purpose, address, address_hash, status, basis, source, decided_at, expires_at)
           SELECT DISTINCT ON (a.channel, a.value) $1::uuid, a.channel, 'marketing', a.value, sha256(convert_to(a.value, 'UTF8')),
                  CASE WHEN a.at % 3 = 0 THEN 'denied' ELSE 'granted' END, CASE WHEN a.at % 3 = 0 THEN NULL ELSE 'consent' END, 'api',
                  a.at, CASE WHEN a.at % 2 = 0 THEN a.at + 31536000000 END
             FROM address_claims a JOIN profiles p ON p.id = a.profile_id
            WHERE p.environment_id = $1::uuid AND (a.channel = 'sms' OR a.at % 2 = 0)`,
          [env],
        ),
      );
      await step(`journeys ${e.path}`, () =>
        c.query(
          `INSERT INTO journeys (id, environment_id, name, definition, event_names, published_at)
           SELECT md5('j-${n}-' || k)::uuid, $1::uuid, (ARRAY['Welcome series','Abandoned cart','Win-back'])[k], '{"steps":[]}',
                  ARRAY['Signed Up','Checkout Started','Order Completed'], now() - interval '40 days'
             FROM generate_series(1, 3) AS k`,
          [env],
        ),
      );
      await step(`journey_runs ${e.path}`, () =>
        c.query(
          `INSERT INTO journey_runs (id, journey_id, environment_id, user_id, user_hash, trigger_key, trigger_hash, status, step, step_started_at,
                                     entered_at, converted_at, ended_at)
           SELECT md5('r-${n}-' || uid)::uuid, md5('j-${n}-' || (1 + abs(hashtext(uid)) % 3))::uuid, $1::uuid, uid, sha256(convert_to(uid, 'UTF8')),
                  'e:m-${n}-' || u, sha256(convert_to('e:m-${n}-' || u, 'UTF8')),
                  (ARRAY['active','completed','exited'])[1 + abs(u) % 3], 1 + abs(u) % 4, t, t, CASE WHEN u % 7 = 0 THEN t + 86400000 END,
                  CASE WHEN u % 3 <> 0 THEN t + 172800000 END
             FROM (SELECT u, CASE WHEN u < 0 THEN 'whale' ELSE 'user-' || u END AS uid, $2::int8 + (u::int8 * 104729) % ($3::int8 - $2::int8) AS t
                     FROM generate_series(-1, $4::int - 1, 10) AS u) x`,
          [env, start, end, e.profiles],
        ),
      );
      await step(`journey_messages ${e.path}`, () =>
        c.query(
          `INSERT INTO journey_messages (run_id, journey_id, step, channel, template, address, status, reason, created_at)
           SELECT r.id, r.journey_id, 1, 'email', 'welcome-1', r.user_id || '@example.com',
                  CASE WHEN r.step % 2 = 0 THEN 'skipped' ELSE 'queued' END, CASE WHEN r.step % 2 = 0 THEN 'no consent' END,
                  to_timestamp(r.entered_at / 1000.0)
             FROM journey_runs r WHERE r.environment_id = $1::uuid AND (r.step_started_at / 10) % 2 = 0`,
          [env],
        ),
      );
    }
    for (const table of ['events', 'event_ids', 'profiles', 'profile_users', 'address_claims', 'consent_decisions', 'journey_runs', 'journey_messages']) {
      await step(`vacuum ${table}`, () => c.query(`VACUUM (ANALYZE) ${table}`));
    }
    await mark('complete', 'done');
    say('seeded');
    return ids;
  } finally {
    await c.end();
  }
}
