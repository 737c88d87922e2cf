// Identify calls recorded before call digests (20261124170000_identify_call_digests) keep their
// idempotency: a database at the schema before it, holding claims with escaped, multi-byte and
// reordered values, is migrated, then each old messageId is used again through the store. The
// same call (traits in another key order included) answers duplicate, a changed userId,
// timestamp or traits a conflict, as before the upgrade.
import test from 'ava';
import { hashStored } from '../../platform/identity-hash.ts';
import { stringifyJson } from '../../platform/json-text.ts';
import { toPgText } from '../../platform/pg-text.ts';
import { applyIdentifyBatch } from '../../identify/identify-batch.ts';
import { toIdentifyCall } from '../../identify/identify-plan.ts';
import { identifyInput } from '../helpers/identify-input.ts';
import { databaseBefore } from '../helpers/migration-db.ts';

const MIGRATION = '20261124170000_identify_call_digests';
const ENV = '00000000-0000-0000-0000-000000000001';

test('claims recorded before call digests answer duplicate and conflict as before', async (t) => {
  const { pool, applyRest } = await databaseBefore(t, MIGRATION, 'digestmig');

  await pool.query(`INSERT INTO organizations (id, slug) VALUES ($1, 'org')`, [ENV]);
  await pool.query(`INSERT INTO environments (id, organization_id, path_value, environment_key, is_production) VALUES ($1, $1, 'org', 'prod', true)`, [ENV]);
  type Call = { messageId: string; userId: string; timestampMs: number | null; traits: Record<string, unknown> };
  const old: Call[] = [
    { messageId: 'm-plain', userId: 'u-1', timestampMs: 1_700_000_000_000, traits: { plan: 'pro', n: 1, nested: { b: 2, a: [1, { y: 1, x: 2 }] } } },
    { messageId: 'm-\0-nul', userId: 'u-\0-😀', timestampMs: null, traits: { name: 'Zoë 漢字', zero: 'a\u0000b' } },
    { messageId: 'm-' + 'é'.repeat(500), userId: 'back\\slash', timestampMs: 5, traits: {} },
  ];
  for (const m of old) {
    // As the store wrote them before the migration.
    await pool.query(
      `INSERT INTO identify_messages (environment_id, message_id, message_hash, user_id, timestamp_ms, traits) VALUES ($1, $2, $3, $4, $5, $6)`,
      [ENV, toPgText(m.messageId), hashStored(toPgText(m.messageId)), toPgText(m.userId), m.timestampMs, stringifyJson(m.traits)],
    );
  }

  await applyRest();

  const reversed = (traits: Record<string, unknown>) => Object.fromEntries(Object.entries(traits).reverse());
  const call = (m: Call, change: Partial<Call> = {}) => {
    const c = { ...m, ...change };
    return toIdentifyCall({ id: ENV, features: [] }, identifyInput(c.userId, c.traits, { messageId: c.messageId, timestampMs: c.timestampMs }), Date.now());
  };
  const again = async (...calls: ReturnType<typeof call>[]) => {
    const outcomes = await applyIdentifyBatch(pool, calls);
    for (const o of outcomes) if (o instanceof Error) throw o;
    return outcomes;
  };
  t.deepEqual(await again(...old.map((m) => call(m))), ['duplicate', 'duplicate', 'duplicate']);
  t.deepEqual(await again(call(old[0], { traits: reversed(old[0].traits) })), ['duplicate'], 'key order aside');
  t.deepEqual(await again(call(old[0], { userId: 'u-2' }), call(old[1], { timestampMs: 1 }), call(old[2], { traits: { x: 1 } })), [
    'conflict',
    'conflict',
    'conflict',
  ]);
  t.deepEqual(await again(call({ ...old[0], messageId: 'm-new' })), ['applied'], 'a new messageId is applied');
  const { rows } = await pool.query<{ n: number; legacy: number }>(
    `SELECT count(*)::int AS n, count(*) FILTER (WHERE call_digest IS NULL)::int AS legacy FROM identify_messages`,
  );
  t.deepEqual(rows[0], { n: 4, legacy: 3 });
});
