// Identify's write path and the Profiles read, in PostgreSQL. One transaction per call:
// idempotency row, a per-user advisory lock, the profile row locked, the pure rules
// (trait merge, consent resolution) applied, and the service events written to the outbox
// in the same transaction as the change.
import { randomUUID } from 'node:crypto';
import { retryWriteConflicts, type Db, type Tx } from '../db.ts';
import { addressAsOf, addressFromTraits, normalizeAddress, supersedes, toDecision, type Decision } from '../domain/consent.ts';
import { joinableEmail } from '../domain/email.ts';
import { jsonEqual } from '../domain/json-equal.ts';
import { fromPgText, isPlainText, toPgText } from '../domain/pg-text.ts';
import { stringifyJson } from '../domain/json-text.ts';
import { mergeTraits, type TraitState } from '../domain/trait-merge.ts';
import type { IdentifyInput } from '../validation/identify.ts';
import { OUTBOX_CHANNEL, SERVICE_EVENTS, writeOutbox } from './outbox.ts';

export interface IdentifyEnvironment {
  id: string;
  features: readonly string[];
}

export type IdentifyResult = { kind: 'applied' | 'duplicate' | 'conflict'; messageId: string };

interface ProfileRow {
  id: string;
  fields: string;
  trait_times: string;
  updated_at: Date;
}

const TRANSACTION = { maxWait: 10_000, timeout: 20_000 };
const LONE_SURROGATE_ESCAPE = /\\ud[89a-f]/i;

export async function applyIdentify(db: Db, env: IdentifyEnvironment, input: IdentifyInput, receivedAt: number, now = Date.now()): Promise<IdentifyResult> {
  const messageId = input.messageId ?? randomUUID();
  const callTime = input.timestampMs ?? receivedAt;
  const traitsText = stringifyJson(input.traits);
  if (
    input.consent.length === 0 &&
    !env.features.includes('join-by-email') &&
    // jsonb holds neither U+0000 nor an unpaired surrogate (JSON.stringify writes both as \u escapes).
    !traitsText.includes('\\u0000') &&
    !LONE_SURROGATE_ESCAPE.test(traitsText) &&
    isPlainText(input.userId) &&
    isPlainText(messageId)
  ) {
    const kind = await applyTraitsOnly(db, env.id, input, messageId, callTime, traitsText);
    if (kind !== 'slow') return { kind, messageId };
  }
  return applyInTransaction(db, env, input, messageId, callTime, traitsText, now);
}

/**
 * The common case in one round trip: the intake_identify() function (see its migration)
 * applies the same rules as the transaction below. It answers 'slow' when the stored profile
 * holds a value jsonb cannot (U+0000); values nested deeper than jsonb allows fail the same way.
 */
async function applyTraitsOnly(
  db: Db,
  envId: string,
  input: IdentifyInput,
  messageId: string,
  callTime: number,
  traitsText: string,
): Promise<IdentifyResult['kind'] | 'slow'> {
  const claims = (['email', 'phone'] as const)
    .filter((trait) => Object.hasOwn(input.traits, trait))
    .map((trait) => {
      const channel = trait === 'email' ? 'email' : 'sms';
      return { channel, value: toPgText(normalizeAddress(channel, input.traits[trait]) ?? '') };
    });
  try {
    const rows = await db.$queryRaw<{ kind: IdentifyResult['kind'] | 'slow' }[]>`
      SELECT intake_identify(${envId}::uuid, ${input.userId}, ${toPgText(input.userId)}, ${messageId}, ${toPgText(messageId)},
        ${input.timestampMs === null ? null : BigInt(input.timestampMs)}::bigint, ${BigInt(callTime)}::bigint, ${traitsText},
        ${joinableEmail(input.traits.email)}, ${JSON.stringify(claims)}::jsonb, ${OUTBOX_CHANNEL}) AS kind`;
    return rows[0].kind;
  } catch (err) {
    // jsonb cannot hold what text storage copes with: 54001, traits nested deeper than jsonb
    // parses; 22P02, a stored profile written by the transaction with a value jsonb refuses
    // (an unpaired surrogate). The function wrote nothing; the transaction path takes the call.
    const text = JSON.stringify(err) + String((err as Error).message);
    if (/54001|22P02|stack depth|invalid input syntax for type json/i.test(text)) return 'slow';
    throw err;
  }
}

async function applyInTransaction(
  db: Db,
  env: IdentifyEnvironment,
  input: IdentifyInput,
  messageId: string,
  callTime: number,
  traitsText: string,
  now: number,
): Promise<IdentifyResult> {
  const userKey = toPgText(input.userId);
  // Joining by email locks a second profile, found only inside the transaction: two calls can
  // each hold the profile the other needs (two users swapping emails). PostgreSQL then rolls
  // one back whole, and running it again gives the result of the two calls in turn.
  return retryWriteConflicts(() =>
    db.$transaction(async (tx) => {
      // Every call for one user runs one at a time; the profile row lock covers calls for other
      // user IDs joined to the same profile. Locks are taken in intake_identify()'s order (user,
      // profile, messageId): two calls on the two paths must never wait on each other in a cycle.
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`user:${env.id}:${userKey}`}, 0))`;
      let profile = await lockProfileOf(tx, env.id, userKey);
      const replay = await claimMessageId(tx, env.id, messageId, userKey, input, traitsText);
      if (replay) return { kind: replay, messageId };

      const joinEmail = env.features.includes('join-by-email') ? joinableEmail(input.traits.email) : null;
      if (joinEmail) profile = await joinByEmail(tx, env.id, userKey, profile, joinEmail);
      if (!profile) profile = await createProfile(tx, env.id, userKey, callTime);

      const merged = mergeTraits(readState(profile), input.traits, callTime);
      await tx.$executeRaw`
      UPDATE profiles SET fields = ${stringifyJson(merged.fields)}, trait_times = ${JSON.stringify(merged.times)},
        updated_at = ${new Date(merged.updatedAt)}, email = ${joinableEmail(merged.fields.email)}
      WHERE id = ${profile.id}::uuid`;
      await recordAddressClaims(tx, profile.id, input.traits, callTime);

      const outbox: { kind: string; payload: unknown }[] = [];
      if (merged.changed.length) {
        outbox.push({
          kind: SERVICE_EVENTS.profileFieldsChanged,
          payload: {
            userId: input.userId,
            profileId: profile.id,
            messageId,
            at: callTime,
            changed: Object.fromEntries(merged.changed.map((k) => [k, merged.fields[k]])),
          },
        });
      }
      for (const change of await resolveConsent(tx, env.id, profile.id, input, callTime, now)) {
        outbox.push({ kind: SERVICE_EVENTS.subscriptionChanged, payload: { userId: input.userId, profileId: profile.id, messageId, ...change } });
      }
      if (outbox.length) {
        await writeOutbox(tx, env.id, outbox);
        await tx.$executeRaw`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`;
      }
      return { kind: 'applied' as const, messageId };
    }, TRANSACTION),
  );
}

/**
 * Records the messageId, or says what an earlier use of it means for this call: the same
 * userId, timestamp (present/absent counts) and traits is a duplicate; anything else a conflict.
 * Consent is not compared.
 */
async function claimMessageId(
  tx: Tx,
  envId: string,
  messageId: string,
  userKey: string,
  input: IdentifyInput,
  traits: string,
): Promise<'duplicate' | 'conflict' | null> {
  const timestampMs = input.timestampMs === null ? null : BigInt(input.timestampMs);
  const inserted = await tx.$executeRaw`
    INSERT INTO identify_messages (environment_id, message_id, user_id, timestamp_ms, traits)
    VALUES (${envId}::uuid, ${toPgText(messageId)}, ${userKey}, ${timestampMs}, ${traits})
    ON CONFLICT DO NOTHING`;
  if (inserted === 1) return null;
  const prior = await tx.identifyMessage.findUniqueOrThrow({ where: { environmentId_messageId: { environmentId: envId, messageId: toPgText(messageId) } } });
  const same = prior.userId === userKey && prior.timestampMs === timestampMs && jsonEqual(JSON.parse(prior.traits), input.traits);
  return same ? 'duplicate' : 'conflict';
}

async function lockProfileOf(tx: Tx, envId: string, userKey: string): Promise<ProfileRow | null> {
  const rows = await tx.$queryRaw<ProfileRow[]>`
    SELECT p.id, p.fields, p.trait_times, p.updated_at FROM profile_users u JOIN profiles p ON p.id = u.profile_id
    WHERE u.environment_id = ${envId}::uuid AND u.user_id = ${userKey} FOR UPDATE OF p`;
  return rows[0] ?? null;
}

async function createProfile(tx: Tx, envId: string, userKey: string, callTime: number): Promise<ProfileRow> {
  const id = randomUUID();
  const updatedAt = new Date(callTime);
  await tx.$executeRaw`INSERT INTO profiles (id, environment_id, updated_at) VALUES (${id}::uuid, ${envId}::uuid, ${updatedAt})`;
  await tx.$executeRaw`INSERT INTO profile_users (environment_id, user_id, profile_id) VALUES (${envId}::uuid, ${userKey}, ${id}::uuid)`;
  return { id, fields: '{}', trait_times: '{}', updated_at: updatedAt };
}

/**
 * When the email belongs to another profile, this user ID joins it: a new user is attached
 * to it; a user with a profile of their own has that profile merged into it (per trait, the
 * later-written value wins), so every user ID of both reads back the same profile.
 */
async function joinByEmail(tx: Tx, envId: string, userKey: string, own: ProfileRow | null, email: string): Promise<ProfileRow | null> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`email:${envId}:${email}`}, 0))`;
  const rows = await tx.$queryRaw<ProfileRow[]>`
    SELECT id, fields, trait_times, updated_at FROM profiles
    WHERE environment_id = ${envId}::uuid AND email = ${email} AND id <> ${own?.id ?? '00000000-0000-0000-0000-000000000000'}::uuid
    ORDER BY created_at, id LIMIT 1 FOR UPDATE`;
  const other = rows[0];
  if (!other) return own;
  if (!own) {
    await tx.$executeRaw`INSERT INTO profile_users (environment_id, user_id, profile_id) VALUES (${envId}::uuid, ${userKey}, ${other.id}::uuid)`;
    return other;
  }
  // Each of the joining profile's traits is applied at its own last-written time.
  const b = readState(own);
  let merged = readState(other);
  for (const key of Object.keys(b.fields)) merged = mergeTraits(merged, { [key]: b.fields[key] }, b.times[key] ?? b.updatedAt);
  merged = { ...merged, updatedAt: Math.max(merged.updatedAt, b.updatedAt) };
  await tx.$executeRaw`UPDATE profile_users SET profile_id = ${other.id}::uuid WHERE profile_id = ${own.id}::uuid`;
  await tx.$executeRaw`UPDATE address_claims SET profile_id = ${other.id}::uuid WHERE profile_id = ${own.id}::uuid`;
  await tx.$executeRaw`DELETE FROM profiles WHERE id = ${own.id}::uuid`;
  return { id: other.id, fields: stringifyJson(merged.fields), trait_times: JSON.stringify(merged.times), updated_at: new Date(merged.updatedAt) };
}

function readState(row: ProfileRow): TraitState {
  return { fields: JSON.parse(row.fields), times: JSON.parse(row.trait_times), updatedAt: row.updated_at.getTime() };
}

/** Every email/phone value a call sends is kept with the call's time, for "as of" lookups. */
async function recordAddressClaims(tx: Tx, profileId: string, traits: Record<string, unknown>, callTime: number) {
  for (const [channel, trait] of [
    ['email', 'email'],
    ['sms', 'phone'],
  ] as const) {
    if (!Object.hasOwn(traits, trait)) continue;
    const value = normalizeAddress(channel, traits[trait]) ?? '';
    await tx.$executeRaw`INSERT INTO address_claims (profile_id, channel, value, at) VALUES (${profileId}::uuid, ${channel}, ${toPgText(value)}, ${BigInt(callTime)})`;
  }
}

interface ConsentChange {
  channel: string;
  purpose: string;
  address: string;
  status: string;
  decidedAt: number;
  expiresAt: number | null;
}

async function resolveConsent(tx: Tx, envId: string, profileId: string, input: IdentifyInput, callTime: number, now: number): Promise<ConsentChange[]> {
  const changes: ConsentChange[] = [];
  const candidates: { decision: Decision; address: string }[] = [];
  for (const raw of input.consent) {
    const decision = toDecision(raw, callTime, now);
    const address = addressFromTraits(decision.channel, input.traits) ?? (await storedAddressAsOf(tx, profileId, decision));
    if (address) candidates.push({ decision, address });
  }
  // One lock per address and channel/purpose, always taken in the same order (no deadlocks).
  const keyOf = (c: (typeof candidates)[number]) => `consent:${envId}:${c.decision.channel}:${c.decision.purpose}:${toPgText(c.address)}`;
  candidates.sort((x, y) => (keyOf(x) < keyOf(y) ? -1 : keyOf(x) > keyOf(y) ? 1 : 0));
  for (const c of candidates) {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${keyOf(c)}, 0))`;
    const { decision, address } = c;
    const where = {
      environmentId_channel_purpose_address: { environmentId: envId, channel: decision.channel, purpose: decision.purpose, address: toPgText(address) },
    };
    const existing = await findDecision(tx, envId, decision.channel, decision.purpose, address);
    if (!supersedes(decision, existing)) continue;
    const data = {
      status: decision.status,
      basis: decision.basis,
      source: toPgText(decision.source),
      proofRef: decision.proofRef === null ? null : toPgText(decision.proofRef),
      decidedAt: BigInt(decision.decidedAt),
      expiresAt: decision.expiresAt === null ? null : BigInt(decision.expiresAt),
    };
    await tx.consentDecision.upsert({ where, create: { ...where.environmentId_channel_purpose_address, ...data }, update: data });
    if (!existing || existing.status !== decision.status || existing.expiresAt !== decision.expiresAt) {
      changes.push({
        channel: decision.channel,
        purpose: decision.purpose,
        address,
        status: decision.status,
        decidedAt: decision.decidedAt,
        expiresAt: decision.expiresAt,
      });
    }
  }
  return changes;
}

async function storedAddressAsOf(tx: Tx, profileId: string, decision: Decision): Promise<string | null> {
  const claims = await tx.addressClaim.findMany({ where: { profileId, channel: decision.channel }, orderBy: { id: 'asc' }, select: { value: true, at: true } });
  return addressAsOf(
    decision.channel,
    claims.map((c) => ({ value: c.value, at: Number(c.at) })),
    decision.decidedAt,
  );
}

/** The stored decision for an address (normalized) and channel/purpose, or null. */
export async function findDecision(
  client: Pick<Tx, 'consentDecision'>,
  environmentId: string,
  channel: Decision['channel'],
  purpose: Decision['purpose'],
  address: string,
): Promise<(Decision & { updatedAt: number }) | null> {
  const row = await client.consentDecision.findUnique({
    where: { environmentId_channel_purpose_address: { environmentId, channel, purpose, address: toPgText(address) } },
  });
  return row ? { ...fromRow(row), updatedAt: row.updatedAt.getTime() } : null;
}

export function fromRow(row: {
  channel: string;
  purpose: string;
  status: string;
  basis: string | null;
  source: string;
  proofRef: string | null;
  decidedAt: bigint;
  expiresAt: bigint | null;
}): Decision {
  return {
    channel: row.channel as Decision['channel'],
    purpose: row.purpose as Decision['purpose'],
    status: row.status as Decision['status'],
    basis: row.basis,
    source: fromPgText(row.source),
    proofRef: row.proofRef === null ? null : fromPgText(row.proofRef),
    decidedAt: Number(row.decidedAt),
    expiresAt: row.expiresAt === null ? null : Number(row.expiresAt),
  };
}

export interface ProfileView {
  profileId: string;
  updatedAt: number;
  fields: Record<string, unknown>;
}

/** By the trimmed user ID only (never by email); a joined user ID reads the shared profile. */
export async function findProfile(db: Db, envId: string, userId: string): Promise<ProfileView | null> {
  const rows = await db.$queryRaw<ProfileRow[]>`
    SELECT p.id, p.fields, p.trait_times, p.updated_at FROM profile_users u JOIN profiles p ON p.id = u.profile_id
    WHERE u.environment_id = ${envId}::uuid AND u.user_id = ${toPgText(userId.trim())}`;
  const row = rows[0];
  return row ? { profileId: row.id, updatedAt: row.updated_at.getTime(), fields: JSON.parse(row.fields) } : null;
}
