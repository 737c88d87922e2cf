// One person as the console's person page shows them (gateway/console/pages/person.ts): the
// profile's traits with when each was last written, the user IDs joined to it, the addresses its
// calls claimed with the consent decisions on them, and the journey runs with their messages. The
// events are the events search's (events/event-search.ts, with the person's user keys). Each
// statement is a lookup by key: profile_users by (environment_id, user_hash), the profile by id,
// the other IDs by profile_id, address claims by (profile_id, …), consent decisions by their key
// (environment, channel, purpose, address hash: each purpose named), journey runs by (environment_id, user_hash) and
// their messages by (run_id, step). The addresses and runs shown are bounded (the page says so).
import type { Db } from '../platform/db.ts';
import { poolOf } from '../platform/db.ts';
import { hashStored } from '../platform/identity-hash.ts';
import { fromPgText } from '../platform/pg-text.ts';
import { CONSENT_PURPOSES, userHashOfKey, userKeyOf } from './person.ts';

/** Addresses, user IDs and journey runs a page lists at most. */
export const PERSON_LIST_LIMIT = 200;

export interface PersonView {
  /** The stored keys of the person's user IDs (the one asked for first): what their events are found by. */
  userKeys: string[];
  /** The user IDs joined to the profile, as stored (trimmed), in order. */
  userIds: string[];
  profile: {
    id: string;
    createdAt: number;
    updatedAt: number;
    /** The traits as stored (JSON text parsed). */
    traits: Record<string, unknown>;
    /** Epoch ms each trait was last written, where stored. */
    traitWrittenAt: Record<string, number>;
  } | null;
  addresses: {
    channel: string;
    value: string;
    /** When a call last claimed it (epoch ms). */
    at: number;
    consent: { purpose: string; status: string; basis: string | null; source: string; decidedAt: number; expiresAt: number | null }[];
  }[];
  runs: {
    id: string;
    journey: string;
    status: string;
    step: number;
    enteredAt: number;
    convertedAt: number | null;
    endedAt: number | null;
    messages: { step: number; channel: string; template: string; address: string | null; status: string; reason: string | null; createdAt: number }[];
  }[];
}

const num = (v: string | null) => (v === null ? null : Number(v));

/** What is stored of one person of an environment, by the userId as a caller sends it (trimmed). */
export async function personView(db: Db, environmentId: string, userId: string): Promise<PersonView> {
  const pool = poolOf(db);
  const userKey = userKeyOf(userId);
  const { rows: users } = await pool.query<{ profile_id: string; user_id: string }>(
    `SELECT u.profile_id::text, o.user_id FROM profile_users u JOIN profile_users o ON o.profile_id = u.profile_id
      WHERE u.environment_id = $1::uuid AND u.user_hash = $2 ORDER BY o.created_at, o.user_id LIMIT $3`,
    [environmentId, userHashOfKey(userKey), PERSON_LIST_LIMIT],
  );
  const profileId = users[0]?.profile_id ?? null;
  const userKeys = [...new Set([userKey, ...users.map((u) => u.user_id)])];
  let profile: PersonView['profile'] = null;
  let addresses: PersonView['addresses'] = [];
  if (profileId) {
    const { rows } = await pool.query<{ fields: string; trait_times: string; created_at: Date; updated_at: Date }>(
      'SELECT fields, trait_times, created_at, updated_at FROM profiles WHERE id = $1::uuid',
      [profileId],
    );
    if (rows[0]) {
      profile = {
        id: profileId,
        createdAt: rows[0].created_at.getTime(),
        updatedAt: rows[0].updated_at.getTime(),
        traits: JSON.parse(rows[0].fields) as Record<string, unknown>,
        traitWrittenAt: JSON.parse(rows[0].trait_times) as Record<string, number>,
      };
    }
    // The newest claim of each address (the (profile_id, channel, at, id) index), newest first.
    const claims = await pool.query<{ channel: string; value: string; at: string }>(
      `SELECT channel, value, max(at)::text AS at FROM address_claims WHERE profile_id = $1::uuid
        GROUP BY channel, value ORDER BY max(at) DESC, channel, value LIMIT $2`,
      [profileId, PERSON_LIST_LIMIT],
    );
    const decisions = claims.rows.length
      ? await pool.query<{
          channel: string;
          address: string;
          purpose: string;
          status: string;
          basis: string | null;
          source: string;
          decided_at: string;
          expires_at: string | null;
        }>(
          // Every purpose named: the key is (environment_id, channel, purpose, address_hash), and
          // without the purpose an address's probe would read every decision of its channel.
          `SELECT d.channel, d.address, d.purpose, d.status, d.basis, d.source, d.decided_at::text, d.expires_at::text
             FROM unnest($2::text[], $3::bytea[]) AS a(channel, hash)
             JOIN consent_decisions d ON d.environment_id = $1::uuid AND d.channel = a.channel AND d.purpose = ANY($4::text[]) AND d.address_hash = a.hash
            ORDER BY d.channel, d.address, d.purpose`,
          [environmentId, claims.rows.map((c) => c.channel), claims.rows.map((c) => hashStored(c.value)), CONSENT_PURPOSES],
        )
      : { rows: [] };
    addresses = claims.rows.map((c) => ({
      channel: c.channel,
      value: fromPgText(c.value),
      at: Number(c.at),
      consent: decisions.rows
        .filter((d) => d.channel === c.channel && d.address === c.value)
        .map((d) => ({
          purpose: d.purpose,
          status: d.status,
          basis: d.basis,
          source: fromPgText(d.source),
          decidedAt: Number(d.decided_at),
          expiresAt: num(d.expires_at),
        })),
    }));
  }
  const runs = await pool.query<{
    id: string;
    name: string;
    status: string;
    step: number;
    entered_at: string;
    converted_at: string | null;
    ended_at: string | null;
    messages: { step: number; channel: string; template: string; address: string | null; status: string; reason: string | null; createdAt: string }[];
  }>(
    `SELECT r.id::text, j.name, r.status, r.step, r.entered_at::text, r.converted_at::text, r.ended_at::text,
            coalesce((SELECT json_agg(json_build_object('step', m.step, 'channel', m.channel, 'template', m.template, 'address', m.address,
                                                         'status', m.status, 'reason', m.reason, 'createdAt', m.created_at) ORDER BY m.step)
                        FROM journey_messages m WHERE m.run_id = r.id), '[]') AS messages
       FROM journey_runs r JOIN journeys j ON j.id = r.journey_id
      WHERE r.environment_id = $1::uuid AND r.user_hash = ANY($2::bytea[]) ORDER BY r.entered_at DESC, r.id LIMIT $3`,
    [environmentId, userKeys.map(userHashOfKey), PERSON_LIST_LIMIT],
  );
  return {
    userKeys,
    userIds: users.map((u) => fromPgText(u.user_id)),
    profile,
    addresses,
    runs: runs.rows.map((r) => ({
      id: r.id,
      journey: r.name,
      status: r.status,
      step: r.step,
      enteredAt: Number(r.entered_at),
      convertedAt: num(r.converted_at),
      endedAt: num(r.ended_at),
      messages: r.messages.map((m) => ({
        ...m,
        template: m.template,
        address: m.address === null ? null : fromPgText(m.address),
        createdAt: new Date(m.createdAt).getTime(),
      })),
    })),
  };
}
