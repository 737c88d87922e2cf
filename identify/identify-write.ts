// Identify's SQL, all of it: the statements of one batch's transaction, each with what it locks
// and what it returns. The driver (identify-batch.ts) sends them; the rules run between them
// (identify-plan.ts). Each round trip is statements sent back to back (pipeline.ts).
// Every transaction takes its locks in one order (advisory keys, messageIds, profile ids,
// consent keys, each sorted: person.ts), so batches of two gateways over the same users wait
// for each other and never deadlock. The statements are named (prepared once per connection) and the
// transaction asks for their generic plan (plan_cache_mode): left to choose, PostgreSQL planned
// these CTEs anew for every batch, a quarter of its CPU on Identify. So each is written to use
// its indexes whatever its arrays hold (`= ANY($n)` rather than a join with unnest, which a
// generic plan may hash).
import type pg from 'pg';
import { QUERY_TIMEOUT_MS, queryTimeoutFor } from '../platform/db.ts';
import { callDigest } from './call-digest.ts';
import { storedDecision, type Decision } from './consent.ts';
import { storedHashHex as hex } from '../platform/identity-hash.ts';
import { fromPgText, toPgText } from '../platform/pg-text.ts';
import { userKeyBits } from '../privacy/rules.ts';
import { Pipeline } from '../platform/pipeline.ts';
import { consentLock, emailLock, LOCK_SQL, lockParam, sortedLocks, userLock } from '../profiles/person.ts';
import { consentRef, messageRef, SnapshotChanged, userRef, type IdentifyCall, type Plan, type Snapshot, type StoredProfile } from './identify-plan.ts';
import type { CachedSnapshot } from './profile-cache.ts';
import { PRIVACY_OF_USERS, PRIVACY_OF_USERS_SQL, type PrivacyRow } from '../privacy/suppression.ts';
import { CallsDropped, droppedCalls } from './dropped-calls.ts';

// ---- keys and shared statement parts ----------------------------------------------------

/** Every user of the batch, and every joinable email of a joining organization (person.ts, lock order 2). */
function lockKeys(calls: IdentifyCall[]): bigint[] {
  const keys: bigint[] = [];
  for (const c of calls) {
    keys.push(userLock(c.envId, c.userKey));
    if (c.joinEmail) keys.push(emailLock(c.envId, c.joinEmail));
  }
  return sortedLocks(keys);
}

interface MessageClaim {
  call: IdentifyCall;
  /** The messageId's key (messageKeyOf). */
  key: string;
  /** What the claims are sorted by: the environment, then the key. */
  order: string;
}

/**
 * A messageId's key in identify_messages: the first 128 bits of its SHA-256, as a uuid. Two
 * messageIds of one environment share a key only through a 128-bit collision.
 */
export function messageKeyOf(messageKey: string): string {
  const h = hex(messageKey);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * One claim per messageId (its first call: later copies are weighed against it in memory), in
 * key order, so two transactions claiming the same messageIds wait for each other in one order.
 */
function messageClaims(calls: IdentifyCall[]): { byMessage: Map<string, MessageClaim>; sorted: MessageClaim[] } {
  const byMessage = new Map<string, MessageClaim>();
  for (const c of calls) {
    const ref = messageRef(c);
    if (byMessage.has(ref)) continue;
    const key = messageKeyOf(c.messageKey);
    byMessage.set(ref, { call: c, key, order: c.envId + key });
  }
  const sorted = [...byMessage.values()].sort((x, y) => compare(x.order, y.order));
  return { byMessage, sorted };
}

/** A statement's unnest parameters: one array per column, each holding that column's value of every row. */
function columns<T>(rows: readonly T[], width: number, row: (r: T) => unknown[]): unknown[][] {
  const out = Array.from({ length: width }, () => new Array<unknown>(rows.length));
  for (let i = 0; i < rows.length; i++) row(rows[i]).forEach((v, c) => (out[c][i] = v));
  return out;
}

/** The claims' four columns: environment, key, call digest, the user's key bits (an erasure finds the person's claims by them). */
const claimValues = (claims: MessageClaim[]) => columns(claims, 4, (m) => [m.call.envId, m.key, m.call.input.callDigest, userKeyBits(m.call.userHashHex)]);

/**
 * Inserts the claims of the four arrays from $p on. `skip`: a messageId already claimed is
 * skipped (the locked path reads which); `fail`: it fails the statement with 23505 (the cached
 * path, which then falls back to the locked path), a plain insert, cheaper for PostgreSQL than
 * ON CONFLICT's speculative one (no second index probe, no confirmation record in the WAL).
 */
const INSERT_CLAIMS = (p: number, taken: 'skip' | 'fail') => `
  INSERT INTO identify_messages (environment_id, message_key, call_digest, user_key)
  SELECT * FROM unnest($${p}::uuid[], $${p + 1}::uuid[], $${p + 2}::int8[], $${p + 3}::int8[])${taken === 'skip' ? '\n  ON CONFLICT DO NOTHING' : ''}`;

/** Address history rows (4 arrays from $p on) and outbox rows (4 arrays from $p + 4 on). */
const INSERT_ADDRESS_CLAIMS_AND_OUTBOX = (p: number) => `
new_claims AS (
  INSERT INTO address_claims (profile_id, channel, value, at) SELECT * FROM unnest($${p}::uuid[], $${p + 1}::text[], $${p + 2}::text[], $${p + 3}::int8[])),
outbox AS (
  INSERT INTO outbox_events (environment_id, user_hash, kind, payload)
  SELECT env, decode(hash, 'hex'), kind, payload FROM unnest($${p + 4}::uuid[], $${p + 5}::text[], $${p + 6}::text[], $${p + 7}::text[]) AS t(env, hash, kind, payload))`;

const addressClaimAndOutboxValues = (plan: Plan) => [
  ...columns(plan.claims, 4, (c) => [c.profileId, c.channel, toPgText(c.value), String(c.at)]),
  ...columns(plan.outbox, 4, (o) => [o.envId, hex(o.userKey), o.kind, o.payload]),
];

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * A large statement's bound, by the text it carries, on the server's side (SET LOCAL: this
 * transaction only; the client's is the pipeline's); an ordinary one keeps the pool's.
 */
const largeStatementBound = (ms: number) => (ms > QUERY_TIMEOUT_MS ? `SET LOCAL statement_timeout = ${ms};` : '');

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** Characters of text a plan's write carries (its statement's time bound grows with them). */
function carriedChars(plan: Plan): number {
  return sum(plan.profiles.map((p) => p.fields.length + p.times.length)) + sum(plan.outbox.map((o) => o.payload.length));
}

function compare<T extends string | bigint>(a: T, b: T): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Updates the profiles of the five arrays from $p on (id, fields, times, updated_at, email);
 * `atVersion`: only a row still at the version of a sixth (xmin: the cached path), returning one
 * row per profile updated.
 */
const UPDATE_PROFILES = (p: number, atVersion: boolean) => `
updated AS (
  UPDATE profiles p SET fields = t.fields, trait_times = t.times, updated_at = t.updated_at, email = t.email
  FROM unnest($${p}::uuid[], $${p + 1}::text[], $${p + 2}::text[], $${p + 3}::timestamptz[], $${p + 4}::text[]${atVersion ? `, $${p + 5}::xid[]` : ''})
    AS t(id, fields, times, updated_at, email${atVersion ? ', version' : ''})
  WHERE p.id = t.id${atVersion ? ' AND p.xmin = t.version\n  RETURNING 1' : ''})`;

const profileValues = (profiles: Plan['profiles']) => columns(profiles, 5, (p) => [p.id, p.fields, p.times, iso(p.updatedAt), p.email]);

// ---- the locked path: locks and reads ----------------------------------------------------

interface ClaimRow {
  kind: 'prior' | 'unclaimed' | 'user' | 'profile';
  env: string;
  /** The key: a messageId's (a uuid), a userId's digest (hex); or the profile's id. */
  hash: string;
  /** prior: the call digest; a claim recorded before digests has none, and its call's userId, timestamp and traits instead. */
  digest: string | null;
  legacy_user_id: string | null;
  legacy_ts: string | null;
  legacy_traits: string | null;
  /** user: the userId as stored and its profile's id. */
  user_id: string | null;
  profile_id: string | null;
  /** profile: its columns (times in ms) and, for batches with consent, its address history; its latest claim of each channel. */
  fields: string | null;
  trait_times: string | null;
  updated_at: string | null;
  email: string | null;
  created_at: string | null;
  claims: StoredClaimRow[] | null;
  latest: StoredClaimRow[] | null;
}

interface StoredClaimRow {
  channel: 'email' | 'sms';
  value: string;
  at: string | number;
  order: string | number;
}

// CLAIM_SQL, in the round trip after the advisory locks. Locks each messageId it claims (INSERT …
// ON CONFLICT DO NOTHING, in key order, so two batches claiming the same messageIds wait for each
// other in one order) and the profiles it reads (FOR UPDATE, in id order): the users' and, for
// joining, every profile holding a joinable email of the batch. Returns ClaimRows: the claims
// committed before it began ('prior'), the messageIds it did not insert ('unclaimed', usually
// none; one that waited for another transaction's insert is read again: PRIORS_SQL), the users'
// profile ids ('user') and the profiles ('profile'). A claim recorded before call digests
// (migration 20261124170000_identify_call_digests) has none: its call's parts come from
// identify_messages_legacy, and its digest is computed here.
// Each kind of row fills its own columns (ClaimRow), NULL elsewhere; the first SELECT names them.
const PRIOR_COLUMNS = `'prior' AS kind, i.environment_id AS env, i.message_key::text AS hash,
  i.call_digest::text AS digest, l.user_id AS legacy_user_id, l.timestamp_ms AS legacy_ts, l.traits AS legacy_traits,
  NULL::text AS user_id, NULL::text AS profile_id,
  NULL::text AS fields, NULL::text AS trait_times, NULL::int8 AS updated_at, NULL::text AS email, NULL::int8 AS created_at, NULL::json AS claims, NULL::json AS latest`;
const NO_PRIOR = 'NULL, NULL, NULL, NULL';
const NO_USER = 'NULL, NULL';
const NO_PROFILE = 'NULL, NULL, NULL, NULL, NULL, NULL, NULL';
const LEGACY_JOIN = `LEFT JOIN identify_messages_legacy l
  ON i.call_digest IS NULL AND l.environment_id = i.environment_id AND l.message_key = i.message_key`;
const CLAIM_JSON = `json_build_object('channel', c.channel, 'value', c.value, 'at', c.at, 'order', c.id)`;
const ADDRESS_HISTORY = `(SELECT coalesce(json_agg(${CLAIM_JSON} ORDER BY c.id), '[]') FROM address_claims c WHERE c.profile_id = l.id)`;
const LATEST_OF = (channel: string) =>
  `(SELECT ${CLAIM_JSON} AS claim FROM address_claims c WHERE c.profile_id = l.id AND c.channel = '${channel}' ORDER BY c.at DESC, c.id DESC LIMIT 1)`;
const LATEST_CLAIMS = `(SELECT json_agg(claim) FROM (${LATEST_OF('email')} UNION ALL ${LATEST_OF('sms')}) latest)`;
const MS = (column: string) => `floor(extract(epoch FROM ${column}) * 1000)::int8`;
const CLAIM_SQL = (withClaims: boolean) => `
WITH m AS (SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS m(env, key)),
ins AS (${INSERT_CLAIMS(1, 'skip')}
  RETURNING environment_id, message_key),
users AS (
  SELECT u.environment_id, u.user_hash, u.user_id, u.profile_id
  FROM profile_users u JOIN unnest($5::uuid[], $6::text[]) AS k(env, hash) ON u.environment_id = k.env AND u.user_hash = decode(k.hash, 'hex')),
locked AS (
  SELECT p.id, p.environment_id, p.fields, p.trait_times, p.updated_at, p.email, p.created_at FROM profiles p
  WHERE p.id = ANY(ARRAY(SELECT profile_id FROM users)) OR (p.email = ANY($7::text[]) AND p.environment_id = ANY($8::uuid[]))
  ORDER BY p.id FOR UPDATE)
SELECT ${PRIOR_COLUMNS} FROM identify_messages i JOIN m ON i.environment_id = m.env AND i.message_key = m.key ${LEGACY_JOIN}
UNION ALL
SELECT 'unclaimed', m.env, m.key::text, ${NO_PRIOR}, ${NO_USER}, ${NO_PROFILE} FROM m
  WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.environment_id = m.env AND ins.message_key = m.key)
UNION ALL
SELECT 'user', environment_id, encode(user_hash, 'hex'), ${NO_PRIOR}, user_id, profile_id::text, ${NO_PROFILE} FROM users
UNION ALL
SELECT 'profile', l.environment_id, l.id::text, ${NO_PRIOR}, ${NO_USER}, l.fields, l.trait_times, ${MS('l.updated_at')}, l.email, ${MS('l.created_at')},
  ${withClaims ? ADDRESS_HISTORY : 'NULL::json'}, ${LATEST_CLAIMS} FROM locked l`;

// Locks nothing; returns the 'prior' ClaimRows of messageIds another transaction claimed while
// CLAIM_SQL waited for it (a second round trip, rare).
const PRIORS_SQL = `
SELECT ${PRIOR_COLUMNS}
  FROM identify_messages i JOIN unnest($1::uuid[], $2::uuid[]) AS k(env, key) ON i.environment_id = k.env AND i.message_key = k.key ${LEGACY_JOIN}`;

/**
 * The locked path's first round trip: BEGIN, the locks, the claims and the reads. Resolves with
 * the batch's snapshot (identify-plan.ts); throws CallsDropped when a tombstone or suppression
 * drops a call, SnapshotChanged when a profile was joined away before it was locked.
 */
export async function readSnapshot(client: pg.PoolClient, calls: IdentifyCall[]): Promise<Snapshot> {
  const { byMessage, sorted: claims } = messageClaims(calls);
  const byUser = new Map<string, { call: IdentifyCall; hash: string }>();
  for (const c of calls) if (!byUser.has(userRef(c))) byUser.set(userRef(c), { call: c, hash: c.userHashHex });
  const userList = [...byUser.values()];
  // The users' environments and key hashes: the claim statement's $5–$6, the privacy read's $1–$2.
  const userColumns = columns(userList, 2, (u) => [u.call.envId, u.hash]);
  const emails = new Set<string>();
  const emailEnvs = new Set<string>();
  for (const c of calls) if (c.joinEmail) (emails.add(c.joinEmail), emailEnvs.add(c.envId));
  const withClaims = calls.some((c) => c.input.consent.length > 0);

  const pipe = new Pipeline(client);
  // The statement reads back the batch's profiles, large when its traits are.
  const claimMs = queryTimeoutFor(sum(claims.map((m) => m.call.input.traitsText.length)));
  pipe.query({ text: `BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; ${largeStatementBound(claimMs)}` });
  // Locks every user's (an erasure takes the erased user's too) and joining email's advisory key, sorted; returns nothing.
  pipe.query({ name: 'identify-lock', text: LOCK_SQL, values: [lockParam(lockKeys(calls))] });
  const claim = pipe.query<ClaimRow>(
    {
      name: `identify-claim-${withClaims}`,
      text: CLAIM_SQL(withClaims),
      values: [...claimValues(claims), ...userColumns, [...emails], [...emailEnvs]],
    },
    claimMs,
  );
  // Locks nothing; returns the users' tombstones and suppressions. Under the same locks an erasure
  // takes (erasure.ts): what it decided is seen here, or it waits for this batch.
  const privacy = pipe.query<PrivacyRow>({ name: 'identify-privacy', text: PRIVACY_OF_USERS_SQL, values: userColumns });
  await pipe.done();
  const { rows } = await claim;
  const dropped = droppedCalls(calls, (await privacy).rows);
  if (dropped.length) throw new CallsDropped(dropped);
  const rowKey = (env: string, hash: string) => `${env}:${hash}`;
  const priorRows = new Map<string, ClaimRow>();
  // Only the messageIds this statement did not insert come back: usually none.
  const unclaimed = new Set<string>();
  const userRows = new Map<string, ClaimRow>();
  const profiles = new Map<string, StoredProfile>();
  for (const r of rows) {
    if (r.kind === 'prior') priorRows.set(rowKey(r.env, r.hash), r);
    else if (r.kind === 'unclaimed') unclaimed.add(rowKey(r.env, r.hash));
    else if (r.kind === 'user') userRows.set(rowKey(r.env, r.hash), r);
    else profiles.set(r.hash, toStored(r));
  }
  const unseen = claims.filter((m) => unclaimed.has(rowKey(m.call.envId, m.key)) && !priorRows.has(rowKey(m.call.envId, m.key)));
  if (unseen.length) {
    const again = await client.query<ClaimRow>(PRIORS_SQL, [unseen.map((m) => m.call.envId), unseen.map((m) => m.key)]);
    for (const r of again.rows) priorRows.set(rowKey(r.env, r.hash), r);
  }

  const priors = new Map<string, string>();
  for (const [ref, m] of byMessage) {
    const r = priorRows.get(rowKey(m.call.envId, m.key));
    if (!r || !unclaimed.has(rowKey(m.call.envId, m.key))) continue;
    priors.set(ref, r.digest ?? callDigest(fromPgText(r.legacy_user_id!), r.legacy_ts === null ? null : Number(r.legacy_ts), JSON.parse(r.legacy_traits!)));
  }
  const users = new Map<string, string>();
  for (const [ref, u] of byUser) {
    const r = userRows.get(rowKey(u.call.envId, u.hash));
    if (r && r.user_id === u.call.userKey) users.set(ref, r.profile_id!);
  }
  // A profile a user pointed at was joined into another (and deleted) before we locked it.
  for (const id of users.values()) if (!profiles.has(id)) throw new SnapshotChanged(`profile ${id} was joined meanwhile`);
  return { users, profiles, priors, decisions: null };
}

const toClaim = (c: StoredClaimRow) => ({ channel: c.channel, value: fromPgText(c.value), at: Number(c.at), order: Number(c.order) });

function toStored(r: ClaimRow): StoredProfile {
  return {
    id: r.hash,
    envId: r.env,
    fields: r.fields!,
    times: r.trait_times!,
    updatedAt: Number(r.updated_at),
    email: r.email,
    createdAt: Number(r.created_at),
    claims: r.claims ? r.claims.map(toClaim) : null,
    latest: Object.fromEntries((r.latest ?? []).map((c) => [c.channel, toClaim(c)])),
  };
}

// Locks nothing (the advisory keys before it do); returns the stored decision of each key.
const DECISIONS_SQL = `
SELECT c.environment_id AS env, c.address, c.channel, c.purpose, c.status, c.basis, c.source,
  c.proof_ref AS "proofRef", c.decided_at AS "decidedAt", c.expires_at AS "expiresAt"
  FROM consent_decisions c JOIN unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS k(env, channel, purpose, hash)
    ON c.environment_id = k.env AND c.channel = k.channel AND c.purpose = k.purpose AND c.address_hash = decode(k.hash, 'hex')`;

type DecisionDbRow = Parameters<typeof storedDecision>[0] & { env: string; address: string };

/** Locks each address and channel/purpose the batch decides on (key order), then reads its decision. */
export async function lockDecisions(client: pg.PoolClient, plan: Plan): Promise<Map<string, Decision>> {
  const keys = [...plan.consentKeys.values()];
  const pipe = new Pipeline(client);
  // Locks each consent key's advisory key, sorted; returns nothing.
  pipe.query({
    name: 'identify-lock',
    text: LOCK_SQL,
    values: [lockParam(sortedLocks(keys.map((k) => consentLock(k.envId, k.channel, k.purpose, k.address))))],
  });
  const read = pipe.query<DecisionDbRow>({
    text: DECISIONS_SQL,
    values: [keys.map((k) => k.envId), keys.map((k) => k.channel), keys.map((k) => k.purpose), keys.map((k) => hex(toPgText(k.address)))],
  });
  await pipe.done();
  const { rows } = await read;
  const out = new Map<string, Decision>();
  for (const r of rows) out.set(consentRef(r.env, r.channel, r.purpose, fromPgText(r.address)), storedDecision(r));
  return out;
}

// ---- the locked path: the write ---------------------------------------------------------

// WRITE_SQL. Locks the rows it writes (the profiles are locked already, CLAIM_SQL); returns the
// transaction's id. Its parts touch distinct rows; foreign keys are checked at its end, when the
// new profiles exist and moved user IDs and claims point at the profile they joined.
const WRITE_SQL = `
WITH
new_profiles AS (
  INSERT INTO profiles (id, environment_id, fields, trait_times, updated_at, email, created_at)
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::timestamptz[])),
${UPDATE_PROFILES(8, false)},
new_users AS (
  INSERT INTO profile_users (environment_id, user_id, user_hash, profile_id)
  SELECT env, user_id, decode(hash, 'hex'), profile_id FROM unnest($13::uuid[], $14::text[], $15::text[], $16::uuid[]) AS t(env, user_id, hash, profile_id)),
moved_users AS (
  UPDATE profile_users u SET profile_id = ($18::uuid[])[array_position($17::uuid[], u.profile_id)] WHERE u.profile_id = ANY($17::uuid[])),
moved_claims AS (
  UPDATE address_claims c SET profile_id = ($18::uuid[])[array_position($17::uuid[], c.profile_id)] WHERE c.profile_id = ANY($17::uuid[])),
decisions AS (
  INSERT INTO consent_decisions (environment_id, channel, purpose, address, address_hash, status, basis, source, proof_ref, decided_at, expires_at, updated_at)
  SELECT env, channel, purpose, address, decode(hash, 'hex'), status, basis, source, proof_ref, decided_at, expires_at, now()
  FROM unnest($19::uuid[], $20::text[], $21::text[], $22::text[], $23::text[], $24::text[], $25::text[], $26::text[], $27::text[], $28::int8[], $29::int8[])
    AS t(env, channel, purpose, address, hash, status, basis, source, proof_ref, decided_at, expires_at)
  ON CONFLICT (environment_id, channel, purpose, address_hash) DO UPDATE SET
    address = EXCLUDED.address, status = EXCLUDED.status, basis = EXCLUDED.basis, source = EXCLUDED.source, proof_ref = EXCLUDED.proof_ref,
    decided_at = EXCLUDED.decided_at, expires_at = EXCLUDED.expires_at, updated_at = now()),${INSERT_ADDRESS_CLAIMS_AND_OUTBOX(30)}
SELECT pg_current_xact_id()::xid::text AS version`;

const orNull = <T>(value: T | null, text: (v: T) => string) => (value === null ? null : text(value));

/** A decision's row of WRITE_SQL's $19–$29: the address and the caller's texts escaped (pg-text.ts), times as int8 text. */
function decisionColumns({ envId, address, decision: d }: Plan['decisions'][number]): unknown[] {
  const a = toPgText(address);
  return [
    envId,
    d.channel,
    d.purpose,
    a,
    hex(a),
    d.status,
    d.basis,
    toPgText(d.source),
    orNull(d.proofRef, toPgText),
    String(d.decidedAt),
    orNull(d.expiresAt, String),
  ];
}

/** Writes the plan and commits; resolves with the transaction's id (the written profiles' version, profile-cache.ts). */
export async function writeAndCommit(client: pg.PoolClient, plan: Plan): Promise<string> {
  const created = plan.profiles.filter((p) => p.isNew);
  const updated = plan.profiles.filter((p) => !p.isNew);
  const ms = queryTimeoutFor(carriedChars(plan));
  const pipe = new Pipeline(client);
  if (ms > QUERY_TIMEOUT_MS) pipe.query({ text: largeStatementBound(ms) });
  const write = pipe.query<{ version: string }>(
    {
      name: 'identify-write',
      text: WRITE_SQL,
      values: [
        ...columns(created, 7, (p) => [p.id, p.envId, p.fields, p.times, iso(p.updatedAt), p.email, iso(p.createdAt)]),
        ...profileValues(updated),
        ...columns(plan.users, 4, (u) => [u.envId, u.userKey, hex(u.userKey), u.profileId]),
        ...columns(plan.moved, 2, (m) => [m.from, m.to]),
        ...columns(plan.decisions, 11, decisionColumns),
        ...addressClaimAndOutboxValues(plan),
      ],
    },
    ms,
  );
  // The joined-away profiles, locked since CLAIM_SQL; returns nothing.
  if (plan.moved.length) pipe.query({ text: 'DELETE FROM profiles WHERE id = ANY($1::uuid[])', values: [plan.moved.map((m) => m.from)] });
  pipe.query({ text: 'COMMIT' });
  await pipe.done();
  return (await write).rows[0].version;
}

// ---- the cached path: one round trip ------------------------------------------------------

// CACHED_WRITE_SQL. Locks each messageId claimed and each profile updated (no advisory key: the
// claims' unique index and the rows' versions stand in for them); returns the transaction's id,
// or fails (23505: a messageId claimed before; 40001: a profile changed since, or a tombstone or
// suppression of one of its users, whose calls the locked path then drops: privacy/rules.ts).
const CACHED_WRITE_SQL = `
WITH
claims AS (${INSERT_CLAIMS(1, 'fail')}),
${UPDATE_PROFILES(5, true)},
${INSERT_ADDRESS_CLAIMS_AND_OUTBOX(11)}
SELECT intake_assert_current((SELECT count(*) FROM updated) = cardinality($5::uuid[]) AND NOT EXISTS (SELECT 1 FROM ${PRIVACY_OF_USERS(19)})) AS ok,
  pg_current_xact_id()::xid::text AS version`;

/**
 * Whether the one statement writes all the plan holds: profile updates, claims and outbox rows.
 * A plan from the cache always does (every user is known, nothing joins, no consent); one that
 * did not would take the locked path.
 */
export function fitsCachedWrite(plan: Plan): boolean {
  return plan.profiles.every((p) => !p.isNew) && !plan.moved.length && !plan.users.length && !plan.decisions.length;
}

/**
 * Writes a plan made from `cached` (fitsCachedWrite) and commits, in one round trip; resolves with the
 * transaction's id (the profiles' new version). Rejects when the cache was stale (40001 from
 * intake_assert_current) or PostgreSQL refused the batch: nothing was written, the connection
 * is out of its transaction.
 */
export async function writeCached(client: pg.PoolClient, calls: IdentifyCall[], cached: CachedSnapshot, plan: Plan): Promise<string> {
  // In id order, as the locked path locks them.
  const profiles = [...plan.profiles].sort((x, y) => compare(x.id, y.id));
  const ms = queryTimeoutFor(carriedChars(plan));
  const pipe = new Pipeline(client);
  pipe.query({ text: `BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; ${largeStatementBound(ms)}` });
  const write = pipe.query<{ version: string }>(
    {
      name: 'identify-cached-write',
      text: CACHED_WRITE_SQL,
      values: [
        ...claimValues(messageClaims(calls).sorted),
        ...profileValues(profiles),
        profiles.map((p) => cached.versions.get(p.id)),
        ...addressClaimAndOutboxValues(plan),
        calls.map((c) => c.envId),
        calls.map((c) => c.userHashHex),
      ],
    },
    ms,
  );
  pipe.query({ text: 'COMMIT' });
  await pipe.done();
  return (await write).rows[0].version;
}
