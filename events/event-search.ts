// The stored events as the console's pages read them (gateway/console/pages): a search over an
// environment's events, newest first, paginated by key, and one event with what the worker did
// with it. Every statement leads with an index and reads a bounded number of rows, whatever the
// table holds (docs/operations.md, "Console pages"):
//
// - without a person: the events' (environment_id, received_at) index, walked backwards from the
//   page's key; a filter on the name, the anonymous ID or the status is applied to at most
//   SEARCH_SCAN rows of that walk, and a page that found fewer than it shows hands on the key
//   where the walk stopped, so the next page goes on from there;
// - with a userId: the hash indexes on user_id and user_key (every event of the person, sorted:
//   as many rows as the person has events);
// - one event: its identity row (event_ids, by environment and message hash), then its row by
//   (environment_id, received_at) in the one partition that day names.
//
// A page's key is (received_at, id): two events received in the same millisecond are told apart
// by their id, so every event shows on exactly one page, never OFFSET (which would read every
// row before the page, and skip or repeat rows as new events arrive).
import type { Db } from '../platform/db.ts';
import { poolOf } from '../platform/db.ts';
import { hashStored } from '../platform/identity-hash.ts';
import { fromPgText, toPgText } from '../platform/pg-text.ts';
import { userKeyOf } from '../profiles/person.ts';

/** Rows of the (environment_id, received_at) walk one filtered page looks through at most. */
export const SEARCH_SCAN = 10_000;

/** A page's position: the (received_at, id) of the last event shown; the next page starts below it. */
export interface EventKey {
  receivedAt: number;
  id: string;
}

export interface EventSearch {
  environmentId: string;
  /** The event's name, exactly. */
  event?: string;
  /** The userId as sent or trimmed (every event of that person), by the hash indexes. */
  userId?: string;
  /** Stored user keys (profile_users.user_id: a joined person's IDs), by the same indexes. */
  userKeys?: string[];
  /** The anonymousId, exactly (no index: within the walk's bound). */
  anonymousId?: string;
  /** 'processed' or 'failed' (queued events are not stored: see the live view's job digests). */
  status?: 'processed' | 'failed';
  /** received_at ≥ from (epoch ms). */
  from?: number;
  /** received_at < to (epoch ms). */
  to?: number;
  /** Start below this key (a later page). */
  before?: EventKey;
  limit: number;
  /** Rows of the walk a filtered page reads at most (SEARCH_SCAN unless a test says otherwise). */
  scan?: number;
}

/** What every view of a stored event names. */
interface StoredEventHead {
  messageId: string;
  event: string;
  userId: string | null;
  anonymousId: string | null;
  status: 'processed' | 'failed';
  receivedAt: number;
}

/** One row of the events list (no payload). */
export interface ListedEvent extends StoredEventHead {
  key: EventKey;
  error: string | null;
}

export interface EventPage {
  events: ListedEvent[];
  /** Where the next page starts, or null when the search reached its end. */
  next: EventKey | null;
  /** Rows the walk read without filling the page (a filter matched few): the next page goes on. */
  scannedOut: boolean;
}

interface Row {
  kind: 'm' | 'e';
  id: string;
  received_at: Date;
  message_id: string;
  event: string;
  user_id: string | null;
  anonymous_id: string | null;
  status: string;
  error: string | null;
  scanned: number;
}

const COLUMNS = 'received_at, message_id, event, user_id, anonymous_id, status, error';

/** The statement of a search and its values (exported for the tests' EXPLAIN). */
export function searchStatement(q: EventSearch): { text: string; values: unknown[] } {
  const values: unknown[] = [q.environmentId];
  const p = (value: unknown) => {
    values.push(value);
    return `$${values.length}`;
  };
  // Bounds of the walk: the environment, the time range, and the page's key (its received_at
  // alone bounds the index scan and prunes partitions; the pair decides ties).
  const bounds = ['environment_id = $1::uuid'];
  if (q.from !== undefined) bounds.push(`received_at >= ${p(new Date(q.from))}::timestamptz`);
  if (q.to !== undefined) bounds.push(`received_at < ${p(new Date(q.to))}::timestamptz`);
  if (q.before) {
    const at = p(new Date(q.before.receivedAt));
    bounds.push(`received_at <= ${at}::timestamptz`, `(received_at, id) < (${at}::timestamptz, ${p(q.before.id)}::bigint)`);
  }
  const filters: string[] = [];
  if (q.event !== undefined) filters.push(`event = ${p(toPgText(q.event))}`);
  if (q.anonymousId !== undefined) filters.push(`anonymous_id = ${p(toPgText(q.anonymousId))}`);
  if (q.status !== undefined) filters.push(`status = ${p(q.status)}`);
  // Qualified: the output's `id` is text (a bigint does not fit a JavaScript number), the order is the column's.
  const order = 'ORDER BY events.received_at DESC, events.id DESC';
  if (q.userId !== undefined || q.userKeys !== undefined) {
    // Every spelling of the person's IDs (as sent, or trimmed: user_key), by the hash indexes.
    const keys = [...new Set([...(q.userKeys ?? []), ...(q.userId === undefined ? [] : [toPgText(q.userId), userKeyOf(q.userId)])])];
    const k = p(keys);
    const where = [...bounds, `(user_id = ANY(${k}::text[]) OR user_key = ANY(${k}::text[]))`, ...filters].join(' AND ');
    return {
      text: `SELECT 'm' AS kind, id::text AS id, ${COLUMNS}, 0 AS scanned FROM events WHERE ${where} ${order} LIMIT ${p(q.limit + 1)}`,
      values,
    };
  }
  if (!filters.length) {
    return {
      text: `SELECT 'm' AS kind, id::text AS id, ${COLUMNS}, 0 AS scanned FROM events WHERE ${bounds.join(' AND ')} ${order} LIMIT ${p(q.limit + 1)}`,
      values,
    };
  }
  const scan = p(q.scan ?? SEARCH_SCAN);
  const limit = p(q.limit + 1);
  return {
    text: `WITH walk AS MATERIALIZED (
        SELECT id, ${COLUMNS} FROM events WHERE ${bounds.join(' AND ')} ${order} LIMIT ${scan}
      ), counted AS (SELECT count(*)::int AS n FROM walk)
      (SELECT 'm' AS kind, w.id::text AS id, ${COLUMNS}, c.n AS scanned FROM walk w, counted c
        WHERE ${filters.join(' AND ')} ORDER BY w.received_at DESC, w.id DESC LIMIT ${limit})
      UNION ALL
      (SELECT 'e' AS kind, w.id::text AS id, ${COLUMNS}, c.n AS scanned FROM walk w, counted c ORDER BY w.received_at, w.id LIMIT 1)`,
    values,
  };
}

function listed(r: Row): ListedEvent {
  return {
    key: { receivedAt: r.received_at.getTime(), id: r.id },
    messageId: fromPgText(r.message_id),
    event: fromPgText(r.event),
    userId: r.user_id === null ? null : fromPgText(r.user_id),
    anonymousId: r.anonymous_id === null ? null : fromPgText(r.anonymous_id),
    status: r.status as ListedEvent['status'],
    receivedAt: r.received_at.getTime(),
    error: r.error,
  };
}

/** One page of an environment's stored events, newest first, and the key of the next page. */
export async function searchEvents(db: Db, q: EventSearch): Promise<EventPage> {
  const { rows } = await poolOf(db).query<Row>(searchStatement(q));
  const matched = rows.filter((r) => r.kind === 'm');
  const events = matched.slice(0, q.limit).map(listed);
  if (matched.length > q.limit) return { events, next: events.at(-1)!.key, scannedOut: false };
  const edge = rows.find((r) => r.kind === 'e');
  // The walk read all it may without filling the page: the next page goes on below its last row.
  if (edge && edge.scanned >= (q.scan ?? SEARCH_SCAN)) {
    return { events, next: { receivedAt: edge.received_at.getTime(), id: edge.id }, scannedOut: true };
  }
  return { events, next: null, scannedOut: false };
}

/** A page key in a URL: `<received_at ms>.<id>`. */
export function formatEventKey(key: EventKey): string {
  return `${key.receivedAt}.${key.id}`;
}

export function parseEventKey(text: unknown): EventKey | undefined {
  const m = typeof text === 'string' ? /^(\d{1,15})\.(\d{1,19})$/.exec(text) : null;
  return m ? { receivedAt: Number(m[1]), id: m[2] } : undefined;
}

/** One stored event as its page shows it. */
export interface EventDetail extends StoredEventHead {
  id: string;
  timestamp: number;
  processedAt: number;
  /** The stored JSON text, exactly as accepted. */
  payload: string;
  withinLimits: boolean;
  limitReason: string | null;
  drivesJourneys: boolean;
  /** When the journey engine handled it (events of a published journey's names), or null. */
  journeysAt: number | null;
  error: string | null;
  /** The journey runs this event started (their trigger is the event). */
  runsStarted: { id: string; journey: string; status: string; step: number; enteredAt: number }[];
}

/** The stored event of a messageId: its identity row gives the day (partition) and the index's key. */
export async function eventDetail(db: Db, environmentId: string, messageId: string): Promise<EventDetail | null> {
  const stored = toPgText(messageId);
  const messageHash = hashStored(stored);
  const pool = poolOf(db);
  const { rows } = await pool.query<{
    id: string;
    message_id: string;
    event: string;
    user_id: string | null;
    anonymous_id: string | null;
    status: string;
    received_at: Date;
    timestamp: Date;
    processed_at: Date;
    payload: string;
    within_limits: boolean;
    limit_reason: string | null;
    drives_journeys: boolean;
    journeys_at: Date | null;
    error: string | null;
  }>(
    `SELECT e.id::text, e.message_id, e.event, e.user_id, e.anonymous_id, e.status, e.received_at, e."timestamp", e.processed_at, e.payload,
            e.within_limits, e.limit_reason, e.drives_journeys, e.journeys_at, e.error
       FROM event_ids i JOIN events e ON e.environment_id = i.environment_id AND e.received_at = i.received_at AND e.message_hash = i.message_hash
      WHERE i.environment_id = $1::uuid AND i.message_hash = $2 AND e.message_id = $3`,
    [environmentId, messageHash, stored],
  );
  const r = rows[0];
  if (!r) return null;
  // Runs are keyed by (journey_id, trigger_hash): the environment's journeys, then one probe each.
  const trigger = `e:${stored}`;
  const runs = await pool.query<{ id: string; name: string; status: string; step: number; entered_at: string }>(
    `SELECT r.id::text, j.name, r.status, r.step, r.entered_at::text
       FROM journeys j JOIN journey_runs r ON r.journey_id = j.id AND r.trigger_hash = $2
      WHERE j.environment_id = $1::uuid ORDER BY r.entered_at, r.id`,
    [environmentId, hashStored(trigger)],
  );
  return {
    id: r.id,
    messageId: fromPgText(r.message_id),
    event: fromPgText(r.event),
    userId: r.user_id === null ? null : fromPgText(r.user_id),
    anonymousId: r.anonymous_id === null ? null : fromPgText(r.anonymous_id),
    status: r.status as EventDetail['status'],
    receivedAt: r.received_at.getTime(),
    timestamp: r.timestamp.getTime(),
    processedAt: r.processed_at.getTime(),
    payload: r.payload,
    withinLimits: r.within_limits,
    limitReason: r.limit_reason,
    drivesJourneys: r.drives_journeys,
    journeysAt: r.journeys_at?.getTime() ?? null,
    error: r.error,
    runsStarted: runs.rows.map((x) => ({ id: x.id, journey: x.name, status: x.status, step: x.step, enteredAt: Number(x.entered_at) })),
  };
}
