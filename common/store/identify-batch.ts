// Identify's group commit: the calls of one batch in ONE transaction, through the node-postgres
// pool (no ORM on this path). A batch whose profiles this gateway cached takes one round trip
// (identify-cached.ts); any other, or one whose cache was stale, takes the locked path below,
// two round trips. Each round trip is statements sent back to back (pg's pipeline mode,
// pipeline.ts); PostgreSQL runs them in order:
//   1. BEGIN and the per-user (and, for joining, per-email) advisory locks, in key order; then,
//      in one statement (whose snapshot is taken once the locks are held): claim every messageId
//      (INSERT … ON CONFLICT DO NOTHING, in key order), read the earlier claims and the users'
//      profile ids, lock the profiles (and those a joinable email may join) in id order and read them;
//   (batches with consent: lock each address and channel/purpose in key order, read its decision;)
//   2. write every result set-based in one statement (profiles, user IDs, address history,
//      decisions, outbox rows), COMMIT; then wake the outbox relay (outbox.ts: not inside the
//      transaction). A failed write aborts the transaction, and the COMMIT behind it rolls back.
// The rules run in between, in memory (identify-plan.ts): on a JSON pool thread when the
// batch's traits or profiles are large (json-pool.ts), so a multi-MB profile of a bad shape
// never holds up the gateway's event loop. Every transaction takes its locks in
// the same order (advisory keys, messageIds, profile ids, consent keys, each sorted), so
// batches of two gateways over the same users wait for each other and never deadlock; a
// deadlock PostgreSQL still reports (or a profile joined away meanwhile) runs the batch again.
// The statements are named (prepared once per connection) and the transaction asks for their
// generic plan (plan_cache_mode): left to choose, PostgreSQL planned these CTEs anew for every
// batch, a quarter of its CPU on Identify. So each is written to use its indexes whatever its
// arrays hold (`= ANY($n)` rather than a join with unnest, which a generic plan may hash).
// A batch PostgreSQL refuses for its data is split in halves until the refused call is alone:
// it gets its own error, every other call its answer.
import { hash } from 'node:crypto';
import type pg from 'pg';
import { isWriteConflict, QUERY_TIMEOUT_MS, queryTimeoutFor } from '../db.ts';
import type { Decision } from '../domain/consent.ts';
import { callDigest } from '../domain/call-digest.ts';
import { fromPgText, toPgText } from '../domain/pg-text.ts';
import { inlineJsonWork, type JsonWork } from '../json-pool.ts';
import { Pipeline } from '../pipeline.ts';
import { fitsCachedWrite, writeCached } from './identify-cached.ts';
import {
  addressClaimAndOutboxValues,
  carriedChars,
  claimValues,
  compare,
  hex,
  INSERT_ADDRESS_CLAIMS_AND_OUTBOX,
  INSERT_CLAIMS,
  iso,
  largeStatementBound,
  messageClaims,
  sum,
} from './identify-rows.ts';
import type { OutboxNotify } from './outbox.ts';
import type { ProfileCache } from './profile-cache.ts';
import {
  consentRef,
  SnapshotChanged,
  userRef,
  type IdentifyCall,
  type Plan,
  type PriorMessage,
  type Snapshot,
  type StoredProfile,
  type Verdict,
} from './identify-plan.ts';

export type BatchOutcome = Verdict | Error;

export interface BatchOptions {
  /** Where a large batch's rules run (json-pool.ts); inline by default. */
  json?: JsonWork;
  /** Tries of a batch that met a deadlock or a changed snapshot. */
  attempts?: number;
  /** Called after a commit that wrote outbox rows (outbox.ts). */
  notify?: OutboxNotify;
  /** The profiles this gateway wrote last: a batch of them takes the one-round-trip path (identify-cached.ts). */
  cache?: ProfileCache;
}

/** Apply a batch; one outcome per call, in order. Never rejects. */
export async function applyIdentifyBatch(pool: pg.Pool, calls: IdentifyCall[], options: BatchOptions = {}): Promise<BatchOutcome[]> {
  const { json = inlineJsonWork, attempts = 5, notify, cache } = options;
  try {
    return await retrying(() => runBatch(pool, json, calls, notify, cache), attempts);
  } catch (err) {
    if (calls.length === 1 || !isDataError(err)) return calls.map(() => err as Error);
    // Halves in arrival order: the first commits before the second starts.
    const half = Math.ceil(calls.length / 2);
    const first = await applyIdentifyBatch(pool, calls.slice(0, half), options);
    return first.concat(await applyIdentifyBatch(pool, calls.slice(half), options));
  }
}

async function retrying<T>(work: () => Promise<T>, attempts: number): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (attempt >= attempts || !(isWriteConflict(err) || err instanceof SnapshotChanged)) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * attempt));
    }
  }
}

/**
 * An error PostgreSQL raised for what a statement carried (not for the connection or the
 * server's state), or one the rules threw on a value: splitting the batch isolates its call.
 * Connection faults are not split: every part would wait for its own connection timeout.
 */
function isDataError(err: unknown): boolean {
  if (err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.length === 5 && !/^(08|53|57|58)/.test(code) && !isWriteConflict(err);
}

/** PostgreSQL answered (with an SQLSTATE): the connection is alive. */
function hasSqlState(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.length === 5;
}

async function runBatch(
  pool: pg.Pool,
  json: JsonWork,
  calls: IdentifyCall[],
  notify: OutboxNotify | undefined,
  cache: ProfileCache | undefined,
): Promise<Verdict[]> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // A checked-out client whose connection drops between statements emits 'error'; unheard,
  // that would end the process. The next statement then fails and the client is dropped.
  const onError = (err: Error) => (broken = err);
  client.on('error', onError);
  try {
    const now = Date.now();
    const cached = cache?.snapshotFor(calls);
    if (cached) {
      const plan = await planOf(json, calls, cached.snapshot, now);
      const version = !fitsCachedWrite(plan)
        ? null
        : await writeCached(client, calls, cached, plan).catch((err: unknown) => {
            // Stale, a messageId claimed before (23505), or refused for its data: the locked path below
            // reads what is stored (and isolates a bad call).
            if (hasSqlState(err)) return null;
            throw err;
          });
      if (version !== null) return committed(plan, version);
    }
    const snap = await readSnapshot(client, calls);
    let plan = await planOf(json, calls, snap, now);
    if (plan.consentKeys.size) {
      snap.decisions = await lockDecisions(client, plan);
      plan = await planOf(json, calls, snap, now);
    }
    return committed(plan, await writeAndCommit(client, plan));
  } catch (err) {
    // After a timeout or a lost connection a ROLLBACK would wait as long again: the connection
    // is dropped instead (PostgreSQL rolls back what it held).
    if (hasSqlState(err) || err instanceof SnapshotChanged || isDataError(err)) await client.query('ROLLBACK').catch((e: Error) => (broken = e));
    else broken = err as Error;
    throw err;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }

  function committed(plan: Plan, version: string): Verdict[] {
    cache?.remember(plan, version);
    if (plan.outbox.length) notify?.();
    return plan.verdicts;
  }
}

// ---- locks and reads ---------------------------------------------------------------------

/** A 64-bit advisory lock key (SHA-256 prefix, signed). */
function advisoryKey(text: string): bigint {
  return hash('sha256', text, 'buffer').readBigInt64BE(0);
}

function sortedKeys(keys: Iterable<bigint>): bigint[] {
  return [...new Set(keys)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Every user of the batch, and every joinable email of a joining organization. */
function lockKeys(calls: IdentifyCall[]): bigint[] {
  const keys: bigint[] = [];
  for (const c of calls) {
    keys.push(advisoryKey(`user:${userRef(c)}`));
    const email = joinEmailOf(c);
    if (email) keys.push(advisoryKey(`email:${c.envId}:${email}`));
  }
  return sortedKeys(keys);
}

function joinEmailOf(c: IdentifyCall): string | null {
  return c.joinByEmail ? c.joinEmail : null;
}

interface ClaimRow {
  kind: 'prior' | 'unclaimed' | 'user' | 'profile';
  env: string;
  /** The key: a messageId's (a uuid), a userId's digest (hex); or the profile's id. */
  hash: string;
  /** prior: call digest (a legacy claim: none, and userId, timestamp, traits); user: userId, profile id; profile: fields, times, updated_at, email. */
  a: string | null;
  b: string | null;
  ts: string | null;
  c: string | null;
  /** profile: created_at (ms) and, for batches with consent, its address history; its latest claim of each channel. */
  e: string | null;
  f: StoredClaimRow[] | null;
  g: StoredClaimRow[] | null;
}

interface StoredClaimRow {
  channel: 'email' | 'sms';
  value: string;
  at: string | number;
  order: string | number;
}

// One round trip after the locks: claim every messageId (INSERT … ON CONFLICT DO NOTHING, in
// key order, so two batches claiming the same messageIds wait for each other in one order),
// read the earlier claims and the users' profile ids, and lock (id order) and read those
// profiles and, for joining, every profile holding a joinable email of the batch. Rows
// committed before the statement began are the priors; of the claims, only those it did not
// insert come back (usually none). A claim that waited for another
// transaction's insert is read again below.
// A claim recorded before call digests (migration 20261124170000_identify_call_digests) has none: its call's
// parts come from identify_messages_legacy, and its digest is computed here.
const PRIOR_COLUMNS = `'prior' AS kind, i.environment_id AS env, i.message_key::text AS hash, i.call_digest::text AS a, l.user_id AS b,
  l.timestamp_ms AS ts, l.traits AS c, NULL::int8 AS e, NULL::json AS f, NULL::json AS g`;
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
  FROM profile_users u JOIN unnest($4::uuid[], $5::text[]) AS k(env, hash) ON u.environment_id = k.env AND u.user_hash = decode(k.hash, 'hex')),
locked AS (
  SELECT p.id, p.environment_id, p.fields, p.trait_times, p.updated_at, p.email, p.created_at FROM profiles p
  WHERE p.id = ANY(ARRAY(SELECT profile_id FROM users)) OR (p.email = ANY($6::text[]) AND p.environment_id = ANY($7::uuid[]))
  ORDER BY p.id FOR UPDATE)
SELECT ${PRIOR_COLUMNS} FROM identify_messages i JOIN m ON i.environment_id = m.env AND i.message_key = m.key ${LEGACY_JOIN}
UNION ALL
SELECT 'unclaimed', m.env, m.key::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM m
  WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.environment_id = m.env AND ins.message_key = m.key)
UNION ALL
SELECT 'user', environment_id, encode(user_hash, 'hex'), user_id, profile_id::text, NULL, NULL, NULL, NULL, NULL FROM users
UNION ALL
SELECT 'profile', l.environment_id, l.id::text, l.fields, l.trait_times, ${MS('l.updated_at')}, l.email, ${MS('l.created_at')},
  ${withClaims ? ADDRESS_HISTORY : 'NULL::json'}, ${LATEST_CLAIMS} FROM locked l`;

const PRIORS_SQL = `
SELECT ${PRIOR_COLUMNS}
  FROM identify_messages i JOIN unnest($1::uuid[], $2::uuid[]) AS k(env, key) ON i.environment_id = k.env AND i.message_key = k.key ${LEGACY_JOIN}`;

/** The batch's plan, computed where its size allows (json-pool.ts); what the rules threw is thrown again here. */
async function planOf(json: JsonWork, calls: IdentifyCall[], snap: Snapshot, now: number): Promise<Plan> {
  const texts = calls.map((c) => c.traitsText);
  for (const p of snap.profiles.values()) texts.push(p.fields, p.times);
  const outcome = await json.runFor(texts, 'planIdentifyBatch', calls, snap, now);
  if (outcome.kind === 'plan') return outcome.plan;
  const rebuilt = { SnapshotChanged, TypeError, RangeError, SyntaxError }[outcome.name];
  throw rebuilt ? new rebuilt(outcome.message) : new Error(outcome.message);
}

async function readSnapshot(client: pg.PoolClient, calls: IdentifyCall[]): Promise<Snapshot> {
  const { byMessage, sorted: claims } = messageClaims(calls);
  const byUser = new Map<string, { call: IdentifyCall; hash: string }>();
  for (const c of calls) if (!byUser.has(userRef(c))) byUser.set(userRef(c), { call: c, hash: hex(c.userKey) });
  const userList = [...byUser.values()];
  const emails = new Set<string>();
  const emailEnvs = new Set<string>();
  for (const c of calls) {
    const email = joinEmailOf(c);
    if (email) (emails.add(email), emailEnvs.add(c.envId));
  }
  const withClaims = calls.some((c) => c.input.consent.length > 0);

  const pipe = new Pipeline(client);
  // The statement reads back the batch's profiles, large when its traits are.
  const claimMs = queryTimeoutFor(sum(claims.map((m) => m.call.traitsText.length)));
  pipe.query({
    text: `BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; ${largeStatementBound(claimMs)}
      SELECT pg_advisory_xact_lock(k) FROM unnest('{${lockKeys(calls).join(',')}}'::int8[]) AS k`,
  });
  const claim = pipe.query<ClaimRow>(
    {
      name: `identify-claim-${withClaims}`,
      text: CLAIM_SQL(withClaims),
      values: [...claimValues(claims), userList.map((u) => u.call.envId), userList.map((u) => u.hash), [...emails], [...emailEnvs]],
    },
    claimMs,
  );
  await pipe.done();
  const { rows } = await claim;
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

  const priors = new Map<string, PriorMessage>();
  for (const [ref, m] of byMessage) {
    const r = priorRows.get(rowKey(m.call.envId, m.key));
    if (!r || !unclaimed.has(rowKey(m.call.envId, m.key))) continue;
    priors.set(ref, { digest: r.a ?? callDigest(fromPgText(r.b!), r.ts === null ? null : Number(r.ts), JSON.parse(r.c!)) });
  }
  const users = new Map<string, string>();
  for (const [ref, u] of byUser) {
    const r = userRows.get(rowKey(u.call.envId, u.hash));
    if (r && r.a === u.call.userKey) users.set(ref, r.b!);
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
    fields: r.a!,
    times: r.b!,
    updatedAt: Number(r.ts),
    email: r.c,
    createdAt: Number(r.e),
    claims: r.f ? r.f.map(toClaim) : null,
    latest: Object.fromEntries((r.g ?? []).map((c) => [c.channel, toClaim(c)])),
  };
}

const DECISIONS_SQL = `
SELECT c.environment_id AS env, c.channel, c.purpose, c.address, c.status, c.basis, c.source, c.proof_ref, c.decided_at, c.expires_at
  FROM consent_decisions c JOIN unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS k(env, channel, purpose, hash)
    ON c.environment_id = k.env AND c.channel = k.channel AND c.purpose = k.purpose AND c.address_hash = decode(k.hash, 'hex')`;

interface DecisionDbRow {
  env: string;
  channel: Decision['channel'];
  purpose: Decision['purpose'];
  address: string;
  status: Decision['status'];
  basis: Decision['basis'];
  source: string;
  proof_ref: string | null;
  decided_at: string;
  expires_at: string | null;
}

/** Locks each address and channel/purpose the batch decides on (key order), then reads its decision. */
async function lockDecisions(client: pg.PoolClient, plan: Plan): Promise<Map<string, Decision>> {
  const keys = [...plan.consentKeys.values()];
  const pipe = new Pipeline(client);
  pipe.query({
    text: 'SELECT pg_advisory_xact_lock(k) FROM unnest($1::int8[]) AS k',
    values: [sortedKeys(keys.map((k) => advisoryKey(`consent:${consentRef(k.envId, k.channel, k.purpose, k.address)}`))).map(String)],
  });
  const read = pipe.query<DecisionDbRow>({
    text: DECISIONS_SQL,
    values: [keys.map((k) => k.envId), keys.map((k) => k.channel), keys.map((k) => k.purpose), keys.map((k) => hex(toPgText(k.address)))],
  });
  await pipe.done();
  const { rows } = await read;
  const out = new Map<string, Decision>();
  for (const r of rows) {
    const address = fromPgText(r.address);
    out.set(consentRef(r.env, r.channel, r.purpose, address), {
      channel: r.channel,
      purpose: r.purpose,
      status: r.status,
      basis: r.basis,
      source: fromPgText(r.source),
      proofRef: r.proof_ref === null ? null : fromPgText(r.proof_ref),
      decidedAt: Number(r.decided_at),
      expiresAt: r.expires_at === null ? null : Number(r.expires_at),
    });
  }
  return out;
}

// ---- the write ---------------------------------------------------------------------------

// One statement. Its parts touch distinct rows; foreign keys are checked at its end, when the
// new profiles exist and moved user IDs and claims point at the profile they joined.
const WRITE_SQL = `
WITH
new_profiles AS (
  INSERT INTO profiles (id, environment_id, fields, trait_times, updated_at, email, created_at)
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::timestamptz[])),
updated AS (
  UPDATE profiles p SET fields = t.fields, trait_times = t.times, updated_at = t.updated_at, email = t.email
  FROM unnest($8::uuid[], $9::text[], $10::text[], $11::timestamptz[], $12::text[]) AS t(id, fields, times, updated_at, email)
  WHERE p.id = t.id),
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

/** Writes the plan and commits; resolves with the transaction's id (the written profiles' version, profile-cache.ts). */
async function writeAndCommit(client: pg.PoolClient, plan: Plan): Promise<string> {
  const created = plan.profiles.filter((p) => p.isNew);
  const updated = plan.profiles.filter((p) => !p.isNew);
  const d = plan.decisions;
  const ms = queryTimeoutFor(carriedChars(plan));
  const pipe = new Pipeline(client);
  if (ms > QUERY_TIMEOUT_MS) pipe.query({ text: largeStatementBound(ms) });
  const write = pipe.query<{ version: string }>(
    {
      name: 'identify-write',
      text: WRITE_SQL,
      values: [
        created.map((p) => p.id),
        created.map((p) => p.envId),
        created.map((p) => p.fields),
        created.map((p) => p.times),
        created.map((p) => iso(p.updatedAt)),
        created.map((p) => p.email),
        created.map((p) => iso(p.createdAt)),
        updated.map((p) => p.id),
        updated.map((p) => p.fields),
        updated.map((p) => p.times),
        updated.map((p) => iso(p.updatedAt)),
        updated.map((p) => p.email),
        plan.users.map((u) => u.envId),
        plan.users.map((u) => u.userKey),
        plan.users.map((u) => hex(u.userKey)),
        plan.users.map((u) => u.profileId),
        plan.moved.map((m) => m.from),
        plan.moved.map((m) => m.to),
        d.map((r) => r.envId),
        d.map((r) => r.decision.channel),
        d.map((r) => r.decision.purpose),
        d.map((r) => toPgText(r.address)),
        d.map((r) => hex(toPgText(r.address))),
        d.map((r) => r.decision.status),
        d.map((r) => r.decision.basis),
        d.map((r) => toPgText(r.decision.source)),
        d.map((r) => (r.decision.proofRef === null ? null : toPgText(r.decision.proofRef))),
        d.map((r) => String(r.decision.decidedAt)),
        d.map((r) => (r.decision.expiresAt === null ? null : String(r.decision.expiresAt))),
        ...addressClaimAndOutboxValues(plan),
      ],
    },
    ms,
  );
  if (plan.moved.length) pipe.query({ text: 'DELETE FROM profiles WHERE id = ANY($1::uuid[])', values: [plan.moved.map((m) => m.from)] });
  pipe.query({ text: 'COMMIT' });
  await pipe.done();
  return (await write).rows[0].version;
}
