// What the runner reads of the system under test while it runs (never judged here): each
// process's clock, the queue's depth, a gateway's replica use, retention's progress.
import { samples, series } from '../test/helpers/metrics.ts';
import { getText, type IntakeProcess } from './intake-process.ts';
import { queryOnce } from './postgres.ts';
import { DATABASE, RETENTION_DAYS, type System } from './system.ts';
import { DAY_MS } from './clock.ts';

/** How far a process's clock may differ from the runner's idea of the service's time (a Date header has whole seconds). */
const CLOCK_TOLERANCE_MS = 3_000;

/** A process's wall clock, from the Date header of its /healthz (whole seconds). */
async function processClock(p: IntakeProcess): Promise<number | null> {
  const reply = await getText(`${p.url}/healthz`);
  return reply?.date ? Date.parse(reply.date) : null;
}

async function postgresClock(url: string): Promise<number | null> {
  try {
    const [row] = await queryOnce<{ now: string }>(url, `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8::text AS now`, [], 3_000);
    return Number(row.now);
  } catch {
    return null;
  }
}

/** Which processes and servers are not on the service's time now (empty: all are). */
export async function offClock(sys: System): Promise<string[]> {
  const expected = sys.clock.now();
  const off: string[] = [];
  const check = (name: string, t: number | null) => {
    if (t === null) off.push(`${name}: no answer`);
    else if (Math.abs(t - expected) > CLOCK_TOLERANCE_MS) off.push(`${name}: ${new Date(t).toISOString()} (expected ${new Date(expected).toISOString()})`);
  };
  const [primary, replica] = await Promise.all([postgresClock(sys.pg.primaryUrl(DATABASE)), postgresClock(sys.pg.replicaUrl(DATABASE))]);
  check('PostgreSQL primary', primary);
  check('PostgreSQL replica', replica);
  for (const p of [...sys.gateways, ...sys.workers]) check(p.name, await processClock(p));
  return off;
}

/**
 * What retention must have dropped by now and has not: events, and messageId records, of the
 * days whose partition is all older than the retention. Null when PostgreSQL does not answer.
 */
export async function expiredLeft(sys: System): Promise<{ events: number; messageIds: number } | null> {
  const cutoff = Math.floor((sys.clock.now() - RETENTION_DAYS * DAY_MS) / DAY_MS) * DAY_MS;
  try {
    const [row] = await queryOnce<{ events: string; ids: string }>(
      sys.pg.primaryUrl(DATABASE),
      `SELECT (SELECT count(*) FROM events WHERE received_at < to_timestamp($1 / 1000.0))::text AS events,
              (SELECT count(*) FROM event_ids WHERE received_at < to_timestamp($1 / 1000.0))::text AS ids`,
      [cutoff],
    );
    return { events: Number(row.events), messageIds: Number(row.ids) };
  } catch {
    return null;
  }
}

/** Jobs of the events queue not yet done (waiting, active, delayed, prioritized), from a worker's metrics; null when none answers. */
export async function queueBacklog(sys: System): Promise<number | null> {
  for (const worker of sys.workers) {
    const reply = await getText(`${worker.url}/metrics`);
    if (!reply) continue;
    const values = samples(reply.text);
    const states = ['waiting', 'active', 'delayed', 'prioritized'].map((state) => values.get(series('intake_queue_jobs', { queue: 'events', state })));
    if (states.some((v) => v === undefined)) continue;
    return states.reduce((sum: number, v) => sum + v!, 0);
  }
  return null;
}

/** A gateway's intake_read_replica_in_use (null: absent, or the gateway did not answer). */
export async function replicaInUse(gateway: IntakeProcess): Promise<number | null> {
  const reply = await getText(`${gateway.url}/metrics`);
  if (!reply) return null;
  return samples(reply.text).get('intake_read_replica_in_use') ?? null;
}

/** Waits until the events queue has nothing left to do (twice in a row, a second apart), within `timeoutMs`. */
export async function drained(sys: System, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let emptyOnce = false;
  while (Date.now() < deadline) {
    const backlog = await queueBacklog(sys);
    if (backlog === 0 && emptyOnce) return true;
    emptyOnce = backlog === 0;
    await new Promise((r) => setTimeout(r, 1_000));
  }
  return false;
}

/**
 * intake_worker_events_total per outcome, added over the workers (since each last started: a
 * killed worker takes its counts with it). For the summary; the properties read the database.
 */
export async function workerEventCounts(sys: System): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const worker of sys.workers) {
    const reply = await getText(`${worker.url}/metrics`);
    if (!reply) continue;
    for (const [key, value] of samples(reply.text)) {
      const outcome = /^intake_worker_events_total\{outcome="(\w+)"\}$/.exec(key)?.[1];
      if (outcome) out[outcome] = (out[outcome] ?? 0) + value;
    }
  }
  return out;
}
