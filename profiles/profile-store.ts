// The Profiles read, through the node-postgres pool directly: on this hot path Prisma's client
// costs several times the statement itself (docs/architecture.md).
import type pg from 'pg';
import { poolOf, type Db } from '../platform/db.ts';
import { userHashOfKey, userKeyOf } from './person.ts';

export interface ProfileView {
  profileId: string;
  updatedAt: number;
  /** The stored traits: JSON text, written by stringifyJson, answered as is. */
  fieldsJson: string;
}

// updated_at as epoch milliseconds (exact: the column holds milliseconds): the answer's form,
// without node-postgres parsing a timestamp into a Date on every read.
const PROFILES_SQL = `
SELECT k.i, p.id, p.fields, (extract(epoch FROM p.updated_at) * 1000)::int8 AS updated_ms
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
  const { rows } = await pool.query<{ i: string; id: string; fields: string; updated_ms: string }>({
    name: 'profiles-read',
    text: PROFILES_SQL,
    values: [lookups.map((l) => l.envId), keys.map(userHashOfKey), keys],
  });
  const out: (ProfileView | null)[] = lookups.map(() => null);
  for (const r of rows) out[Number(r.i) - 1] = { profileId: r.id, updatedAt: Number(r.updated_ms), fieldsJson: r.fields };
  return out;
}

export async function findProfile(db: Db, envId: string, userId: string): Promise<ProfileView | null> {
  return (await findProfiles(poolOf(db), [{ envId, userId }]))[0];
}
