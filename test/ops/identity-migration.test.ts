// Existing rows migrate to the digest keys (issue 10): a database at the schema before
// 20261123100000_identity_hashes, with rows holding escaped, multi-byte and long values, gets
// keys equal to what platform/identity-hash.ts computes for new rows, so lookups, dedup and
// consent find the old rows after the upgrade.
import test from 'ava';
import { hashStored } from '../../platform/identity-hash.ts';
import { toPgText } from '../../platform/pg-text.ts';
import { databaseBefore } from '../helpers/migration-db.ts';

const MIGRATION = '20261123100000_identity_hashes';

test('the identity-hash migration keys existing rows as new rows are keyed', async (t) => {
  const { pool: db, applyMigration } = await databaseBefore(t, MIGRATION, 'idmig');

  const values = ['plain', 'x\0y', 'a\ud800b', '😀 漢字 ü', 'back\\slash', 'é'.repeat(1000)].map(toPgText);
  const env = '00000000-0000-0000-0000-000000000001';
  await db.query(`INSERT INTO organizations (id, slug) VALUES ($1, 'org')`, [env]);
  await db.query(`INSERT INTO environments (id, organization_id, path_value, environment_key, is_production) VALUES ($1, $1, 'org', 'prod', true)`, [env]);
  for (const [i, v] of values.entries()) {
    const profile = `00000000-0000-0000-0000-0000000001${String(i).padStart(2, '0')}`;
    await db.query(
      `INSERT INTO events (environment_id, message_id, event, "timestamp", received_at, payload, status, within_limits, drives_journeys)
       VALUES ($1, $2, 'e', now(), now(), '{}', 'processed', true, true)`,
      [env, v],
    );
    await db.query(`INSERT INTO profiles (id, environment_id, updated_at) VALUES ($1, $2, now())`, [profile, env]);
    await db.query(`INSERT INTO profile_users (environment_id, user_id, profile_id) VALUES ($1, $2, $3)`, [env, v, profile]);
    await db.query(`INSERT INTO identify_messages (environment_id, message_id, user_id, traits) VALUES ($1, $2, $2, '{}')`, [env, v]);
    await db.query(
      `INSERT INTO consent_decisions (environment_id, channel, purpose, address, status, source, decided_at) VALUES ($1, 'email', 'marketing', $2, 'granted', 'api', 0)`,
      [env, v],
    );
  }

  await applyMigration();

  for (const [table, column, key] of [
    ['events', 'message_id', 'message_hash'],
    ['profile_users', 'user_id', 'user_hash'],
    ['identify_messages', 'message_id', 'message_hash'],
    ['consent_decisions', 'address', 'address_hash'],
  ]) {
    const { rows } = await db.query<{ v: string; k: Buffer }>(`SELECT ${column} AS v, ${key} AS k FROM ${table}`);
    t.is(rows.length, values.length, table);
    for (const row of rows) t.deepEqual(row.k, hashStored(row.v), `${table}: ${JSON.stringify(row.v.slice(0, 20))}`);
  }
  // A new row with an old row's value is a duplicate under the new key.
  const dup = await db.query(
    `INSERT INTO events (environment_id, message_id, message_hash, event, "timestamp", received_at, payload, status, within_limits, drives_journeys)
     VALUES ($1, $2, $3, 'e', now(), now(), '{}', 'processed', true, true) ON CONFLICT DO NOTHING`,
    [env, values[3], hashStored(values[3])],
  );
  t.is(dup.rowCount, 0);
});
