// intake users export: everything held about one person as one JSON document, written as it is
// read. The events, which may be millions, come through a server-side cursor a page at a time
// and are written with the stream's backpressure, so memory stays that of one page; stored JSON
// (traits, event payloads) is written verbatim, never parsed.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type pg from 'pg';
import { withQueryTimeout } from '../platform/db.ts';
import { hashStored } from '../platform/identity-hash.ts';
import { stringifyJson } from '../platform/json-text.ts';
import { fromPgText } from '../platform/pg-text.ts';
import { userHashOf, userHashOfKey, userKeyOf } from '../profiles/person.ts';
import { auditHashHex } from './audit.ts';

/** The bound of each of the export's statements, on both sides (statement_timeout is lifted for its transaction). */
const EXPORT_TIMEOUT_MS = 3_600_000;

/** Events per FETCH: a page of payloads in memory at a time. */
const PAGE = 500;
/**
 * Text per write. Kept well under V8's large-object size (about 128 KB): a larger string is
 * born in the old generation and waits for a full collection, so a page written as one string
 * let the heap grow by tens of MB of garbage over 100,000 events.
 */
const CHUNK_CHARS = 32 * 1024;

/**
 * Every this many pages a full collection runs. V8 grows the old generation lazily: the
 * driver's row objects of a page outlive a scavenge while the next FETCH is on its way, are
 * promoted, and 100,000 events left ~60 MB of such garbage before a full collection came.
 * A full collection of this small heap costs a few ms per 2,000 events (measured: 100,000 events
 * in 5.7 s at 84 MB of RSS, against 5.0 s at 135 MB without).
 */
const GC_PAGES = 4;

/** V8's full collection (node --expose-gc's `gc`), made available at run time. */
function fullCollector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

type Out = NodeJS.WritableStream;

function write(out: Out, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const ok = out.write(text, (err) => (err ? reject(err) : undefined));
    if (ok) resolve();
    else out.once('drain', resolve);
  });
}

/** The last write, settled once it has left (a pipe takes large output asynchronously). */
function end(out: Out, text: string): Promise<void> {
  return new Promise((resolve, reject) => out.write(text, (err) => (err ? reject(err) : resolve())));
}

/**
 * The environment an export reads (Production unless `pathValue`), through the pool: a Prisma
 * query would load its query engine, about 50 MB of the export's 100 MB budget.
 */
export async function exportEnvironment(pool: pg.Pool, orgSlug: string, pathValue: string | undefined): Promise<{ id: string; pathValue: string } | string> {
  const { rows } = await pool.query<{ id: string | null; path_value: string | null }>(
    `SELECT e.id::text, e.path_value FROM organizations o
       LEFT JOIN environments e ON e.organization_id = o.id AND (CASE WHEN $2::text IS NULL THEN e.is_production ELSE e.path_value = $2 END)
      WHERE o.slug = $1`,
    [orgSlug, pathValue ?? null],
  );
  if (!rows.length) return `organization ${orgSlug} does not exist`;
  if (rows[0].id === null) return `environment ${pathValue} does not exist in ${orgSlug}`;
  return { id: rows[0].id, pathValue: rows[0].path_value! };
}

/** `auditSecret`: the document's userHash is the audit's keyed hash (audit.ts), so its records can be matched. */
export async function exportPerson(pool: pg.Pool, environmentId: string, userId: string, auditSecret: Buffer, out: Out): Promise<void> {
  const userKey = userKeyOf(userId);
  const client = await pool.connect();
  // The pool's client-side bound is for requests: a large export's sort may take longer.
  const q = <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => client.query<R>(withQueryTimeout({ text, values }, EXPORT_TIMEOUT_MS));
  try {
    // One snapshot for the whole document: what it says was all true at one moment.
    await q('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = 0');
    const { rows: users } = await q<{ profile_id: string; user_id: string }>(
      `SELECT u.profile_id::text, o.user_id FROM profile_users u JOIN profile_users o ON o.profile_id = u.profile_id
        WHERE u.environment_id = $1 AND u.user_hash = $2 ORDER BY o.user_id`,
      [environmentId, userHashOfKey(userKey)],
    );
    const profileId = users[0]?.profile_id ?? null;
    const userKeys = [...new Set([userKey, ...users.map((u) => u.user_id)])];
    const hashes = userKeys.map(userHashOfKey);

    await write(out, `{"userId":${stringifyJson(userId)},"userHash":${JSON.stringify(auditHashHex(auditSecret, userHashOf(userId)))}`);
    await write(out, `,"userIds":${stringifyJson(users.map((u) => fromPgText(u.user_id)))}`);

    let profile = 'null';
    let addresses: { channel: string; value: string; at: number }[] = [];
    let consent: unknown[] = [];
    if (profileId) {
      const { rows } = await q<{ fields: string; trait_times: string; updated_at: Date; created_at: Date }>(
        'SELECT fields, trait_times, updated_at, created_at FROM profiles WHERE id = $1',
        [profileId],
      );
      if (rows.length) {
        const p = rows[0];
        // Stored JSON text, written as stored: traits of any shape and depth round-trip exactly.
        profile = `{"profileId":${JSON.stringify(profileId)},"createdAt":${p.created_at.getTime()},"updatedAt":${p.updated_at.getTime()},"traits":${p.fields},"traitWrittenAt":${p.trait_times}}`;
      }
      const claims = await q<{ channel: string; value: string; at: string }>(
        'SELECT channel, value, at::text FROM address_claims WHERE profile_id = $1 ORDER BY id',
        [profileId],
      );
      addresses = claims.rows.map((c) => ({ channel: c.channel, value: fromPgText(c.value), at: Number(c.at) }));
      const distinct = [...new Map(claims.rows.map((c) => [`${c.channel}\0${c.value}`, c])).values()];
      const decisions = await q<Record<string, unknown>>(
        `SELECT d.channel, d.purpose, d.address, d.status, d.basis, d.source, d.proof_ref AS "proofRef", d.decided_at::text AS "decidedAt", d.expires_at::text AS "expiresAt"
           FROM consent_decisions d JOIN unnest($2::text[], $3::bytea[]) AS a(channel, hash)
             ON d.environment_id = $1 AND d.channel = a.channel AND d.address_hash = a.hash
          ORDER BY d.channel, d.purpose, d.address`,
        [environmentId, distinct.map((c) => c.channel), distinct.map((c) => hashStored(c.value))],
      );
      consent = decisions.rows.map((d) => ({
        ...d,
        address: fromPgText(d.address as string),
        source: fromPgText(d.source as string),
        proofRef: d.proofRef === null ? null : fromPgText(d.proofRef as string),
        decidedAt: Number(d.decidedAt),
        expiresAt: d.expiresAt === null ? null : Number(d.expiresAt),
      }));
    }
    await write(out, `,"profile":${profile},"addresses":${stringifyJson(addresses)},"consent":${stringifyJson(consent)}`);

    const runs = await q<Record<string, unknown>>(
      `SELECT r.id::text, r.journey_id::text AS "journeyId", j.name AS "journeyName", r.status, r.step, r.entered_at::text AS "enteredAt",
              r.converted_at::text AS "convertedAt", r.ended_at::text AS "endedAt",
              coalesce((SELECT json_agg(json_build_object('step', m.step, 'channel', m.channel, 'template', m.template, 'address', m.address,
                                                           'status', m.status, 'reason', m.reason, 'createdAt', m.created_at) ORDER BY m.id)
                          FROM journey_messages m WHERE m.run_id = r.id), '[]') AS messages
         FROM journey_runs r JOIN journeys j ON j.id = r.journey_id
        WHERE r.environment_id = $1 AND r.user_hash = ANY($2::bytea[]) ORDER BY r.entered_at, r.id`,
      [environmentId, hashes],
    );
    const numberOrNull = (v: unknown) => (v === null ? null : Number(v));
    const journeyRuns = runs.rows.map((r) => ({
      ...r,
      enteredAt: Number(r.enteredAt),
      convertedAt: numberOrNull(r.convertedAt),
      endedAt: numberOrNull(r.endedAt),
    }));
    await write(out, `,"journeyRuns":${stringifyJson(journeyRuns)},"events":[`);

    // Events carry the userId as sent: every spelling that trims to one of the person's IDs (events/event-store.ts user_key).
    await q(
      `DECLARE person_events NO SCROLL CURSOR FOR
         SELECT received_at, status, error, payload FROM events
          WHERE environment_id = $1 AND (user_id = ANY($2::text[]) OR user_key = ANY($2::text[])) ORDER BY received_at, id`,
      [environmentId, userKeys],
    );
    let first = true;
    const collect = fullCollector();
    for (let pages = 1; ; pages++) {
      if (pages % GC_PAGES === 0) collect();
      const page = await q<{ received_at: Date; status: string; error: string | null; payload: string }>(`FETCH ${PAGE} FROM person_events`);
      if (!page.rows.length) break;
      let chunk = '';
      for (const e of page.rows) {
        chunk += `${first ? '' : ','}{"receivedAt":${e.received_at.getTime()},"status":${JSON.stringify(e.status)},"error":${e.error === null ? 'null' : JSON.stringify(e.error)},"event":${e.payload}}`;
        first = false;
        if (chunk.length >= CHUNK_CHARS) (await write(out, chunk), (chunk = ''));
      }
      if (chunk) await write(out, chunk);
    }
    await q('COMMIT');
    await end(out, ']}\n');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
