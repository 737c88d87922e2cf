// The final state, read once every fault was healed and the queue drained: the tables the
// properties look at (from the primary) and every key of the run's Redis Cluster with the
// strings it holds (its name, fields, values, and the string leaves of any JSON in them).
import type { Snapshot } from './checker/model.ts';
import type { Org } from './history.ts';
import { workerEventCounts } from './observe.ts';
import { queryOnce } from './postgres.ts';
import { masters } from './redis-faults.ts';
import { DATABASE, type System } from './system.ts';

export async function readSnapshot(sys: System, drained: boolean): Promise<Snapshot> {
  const takenAt = Date.now();
  const url = sys.pg.primaryUrl(DATABASE);
  const orgOf = new Map(Object.entries(sys.orgs).map(([org, access]) => [access.environmentId, org as Org]));
  const q = async <R extends { environment_id: string }>(sql: string) =>
    (await queryOnce<R>(url, sql, [], 120_000)).filter((r) => orgOf.has(r.environment_id)).map((r) => ({ ...r, org: orgOf.get(r.environment_id)! }));

  const events = (
    await q<{ environment_id: string; message_id: string; user_id: string | null; received_at: string }>(
      `SELECT environment_id::text, message_id, user_id, floor(extract(epoch FROM received_at) * 1000)::int8::text AS received_at FROM events`,
    )
  ).map((r) => ({ org: r.org, messageId: r.message_id, userId: r.user_id, receivedAt: Number(r.received_at) }));
  const profileUsers = (
    await q<{ environment_id: string; user_id: string; profile_id: string }>(`SELECT environment_id::text, user_id, profile_id::text FROM profile_users`)
  ).map((r) => ({ org: r.org, userId: r.user_id, profileId: r.profile_id }));
  const profiles = (await q<{ environment_id: string; id: string; email: string | null }>(`SELECT environment_id::text, id::text, email FROM profiles`)).map(
    (r) => ({
      org: r.org,
      id: r.id,
      email: r.email,
    }),
  );
  const identifyMessages = (
    await q<{ environment_id: string; message_key: string; user_key: string | null }>(
      `SELECT environment_id::text, message_key::text, user_key::text FROM identify_messages`,
    )
  ).map((r) => ({ org: r.org, messageKey: r.message_key, userKey: r.user_key }));
  const journeyRuns = (
    await q<{ environment_id: string; user_id: string; trigger_key: string }>(`SELECT environment_id::text, user_id, trigger_key FROM journey_runs`)
  ).map((r) => ({
    org: r.org,
    userId: r.user_id,
    triggerKey: r.trigger_key,
  }));
  // Every record of a messageId whose event is not stored (one anti-join: a pass over each table).
  const orphanMessageIds = (
    await q<{ environment_id: string; message_hash: string; received_at: string }>(
      `SELECT i.environment_id::text, encode(i.message_hash, 'hex') AS message_hash, floor(extract(epoch FROM i.received_at) * 1000)::int8::text AS received_at
         FROM event_ids i WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.environment_id = i.environment_id AND e.message_hash = i.message_hash)`,
    )
  ).map((r) => ({ org: r.org, messageHash: r.message_hash, receivedAt: Number(r.received_at) }));
  const addressClaims = (
    await q<{ environment_id: string; value: string }>(`SELECT p.environment_id::text, c.value FROM address_claims c JOIN profiles p ON p.id = c.profile_id`)
  ).map((r) => ({ org: r.org, value: r.value }));

  return {
    takenAt,
    offsetMs: sys.clock.offsetMs,
    events,
    profileUsers,
    profiles,
    identifyMessages,
    journeyRuns,
    orphanMessageIds,
    addressClaims,
    redis: await redisStrings(sys, orgOf),
    drained,
    workerEvents: await workerEventCounts(sys),
  };
}

/** Every key on every master of the cluster (it is the run's own), with the strings it holds. */
async function redisStrings(sys: System, orgOf: Map<string, Org>): Promise<Snapshot['redis']> {
  const out: Snapshot['redis'] = [];
  const orgOfKey = (key: string) => [...orgOf].find(([environmentId]) => key.includes(environmentId))?.[1] ?? null;
  for (const node of await masters(sys.redis)) {
    const r = node.admin;
    let cursor = '0';
    do {
      const [next, keys] = (await r.scan(cursor, 'COUNT', 500)) as [string, string[]];
      cursor = next;
      for (const key of keys) {
        const type = await r.type(key);
        let values: string[] = [];
        if (type === 'string') values = [(await r.get(key)) ?? ''];
        else if (type === 'hash') values = Object.entries(await r.hgetall(key)).flat();
        else if (type === 'list') values = await r.lrange(key, 0, -1);
        else if (type === 'set') values = await r.smembers(key);
        else if (type === 'zset') values = await r.zrange(key, 0, -1);
        else if (type === 'stream') values = ((await r.xrange(key, '-', '+')) as [string, string[]][]).flatMap(([, fields]) => fields);
        out.push({ key, org: orgOfKey(key), strings: [key, ...values.flatMap(withJsonLeaves)] });
      }
    } while (cursor !== '0');
  }
  return out;
}

/** A value, and when it is JSON, every string leaf and key inside it. */
function withJsonLeaves(value: string): string[] {
  const out = [value];
  const t = value.trimStart()[0];
  if (t !== '{' && t !== '[' && t !== '"') return out;
  try {
    const walk = (v: unknown): void => {
      if (typeof v === 'string') {
        out.push(v);
        // BullMQ keeps a job's data as JSON text inside JSON: read that too.
        if (/^\s*[[{]/.test(v)) out.push(...withJsonLeaves(v).slice(1));
      } else if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object')
        for (const [k, x] of Object.entries(v)) {
          out.push(k);
          walk(x);
        }
    };
    walk(JSON.parse(value));
  } catch {
    // Not JSON: the value itself is all.
  }
  return out;
}
