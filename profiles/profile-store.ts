// Identify's write path and the Profiles read. Identify applies calls in batches, one
// transaction each (identify-batch.ts: locks and set-based writes; identify-plan.ts: the
// rules); applyIdentify is a batch of one for callers outside the gateway. Reads go through
// the node-postgres pool directly: on these hot paths Prisma's client costs several times the
// statement itself (docs/architecture.md).
import type pg from 'pg';
import { poolOf, type Db, type Tx } from '../platform/db.ts';
import { storedDecision, type Decision } from '../identify/consent.ts';
import { hashStored } from '../platform/identity-hash.ts';
import { stringifyJson } from '../platform/json-text.ts';
import { toPgText } from '../platform/pg-text.ts';
import type { IdentifyInput } from '../identify/validation.ts';
import { applyIdentifyBatch } from '../identify/identify-batch.ts';
import { userHashOfKey, userKeyOf } from './person.ts';
import { toIdentifyCall, type Verdict } from '../identify/identify-plan.ts';

export interface IdentifyEnvironment {
  id: string;
  features: readonly string[];
}

export type IdentifyResult = { kind: Verdict; messageId: string };

/** One call applied on its own (the gateway batches its calls: gateway/handlers/identify.ts). */
export async function applyIdentify(db: Db, env: IdentifyEnvironment, input: IdentifyInput, receivedAt: number): Promise<IdentifyResult> {
  const call = toIdentifyCall(env, input, receivedAt);
  const [outcome] = await applyIdentifyBatch(poolOf(db), [call]);
  if (outcome instanceof Error) throw outcome;
  return { kind: outcome, messageId: call.messageId };
}

/** The stored decision for an address (normalized) and channel/purpose, or null. */
export async function findDecision(
  client: Pick<Tx, 'consentDecision'>,
  environmentId: string,
  channel: Decision['channel'],
  purpose: Decision['purpose'],
  address: string,
): Promise<(Decision & { updatedAt: number }) | null> {
  const addressKey = toPgText(address);
  const row = await client.consentDecision.findUnique({
    where: { environmentId_channel_purpose_addressHash: { environmentId, channel, purpose, addressHash: hashStored(addressKey) } },
  });
  return row && row.address === addressKey ? { ...storedDecision(row), updatedAt: row.updatedAt.getTime() } : null;
}

export interface ProfileView {
  profileId: string;
  updatedAt: number;
  /** The stored traits: JSON text, written by stringifyJson, answered as is. */
  fieldsJson: string;
}

const PROFILES_SQL = `
SELECT k.i, p.id, p.fields, p.updated_at
FROM unnest($1::uuid[], $2::bytea[], $3::text[]) WITH ORDINALITY AS k(env, hash, user_id, i)
JOIN profile_users u ON u.environment_id = k.env AND u.user_hash = k.hash AND u.user_id = k.user_id
JOIN profiles p ON p.id = u.profile_id`;

export interface ProfileLookup {
  envId: string;
  userId: string;
}

/**
 * Profiles by the trimmed user ID only (never by email); a joined user ID reads the shared
 * profile. Many lookups in one statement (the gateway groups the reads that arrive together).
 */
export async function findProfiles(pool: pg.Pool, lookups: ProfileLookup[]): Promise<(ProfileView | null)[]> {
  const keys = lookups.map((l) => userKeyOf(l.userId));
  const { rows } = await pool.query<{ i: string; id: string; fields: string; updated_at: Date }>({
    name: 'profiles-read',
    text: PROFILES_SQL,
    values: [lookups.map((l) => l.envId), keys.map(userHashOfKey), keys],
  });
  const out: (ProfileView | null)[] = lookups.map(() => null);
  for (const r of rows) out[Number(r.i) - 1] = { profileId: r.id, updatedAt: r.updated_at.getTime(), fieldsJson: r.fields };
  return out;
}

export async function findProfile(db: Db, envId: string, userId: string): Promise<ProfileView | null> {
  return (await findProfiles(poolOf(db), [{ envId, userId }]))[0];
}
