// Clock moves: the clients quiesce, the offset file moves every process forward by whole days,
// and the run waits until every process and both PostgreSQL servers show the new time and
// retention has dropped what is now past it; then the clients go on. The retention scenario
// also sends earlier events again once their day has passed the retention, while the workers'
// storage maintenance is held off (the run takes its lock), as when no maintenance round has
// come yet: the product stores such a resend as a new event whether or not the old day was
// dropped, so once retention has caught up the resend must still be stored.
import { CLOCK_FOLLOW_MS, DAY_MS } from './clock.ts';
import type { Gate } from './gate.ts';
import type { ClockMove, Org, Recorder, TrackOp } from './history.ts';
import { answered } from './history.ts';
import { ClientConnections } from './http-client.ts';
import pg from 'pg';
import { STORAGE_MAINTENANCE_LOCK } from '../events/storage.ts';
import { expiredLeft, offClock, queueBacklog } from './observe.ts';
import type { Step } from './plan.ts';
import type { Rng } from './prng.ts';
import { sendTrack, sleep, targets, type Shared } from './generator.ts';
import { RETENTION_SETTLE_MS } from './checker/model.ts';
import { DATABASE, type System } from './system.ts';

/** The retention scenario's move: past the retention and past the partitions made ahead. */
const RESEND_CLOCK_DAYS = 3;

/** How long every process may take to show a new time and retention to catch up. */
const SETTLE_BOUND_MS = 45_000;

async function settle(sys: System): Promise<{ settled: boolean; note?: string }> {
  await sleep(CLOCK_FOLLOW_MS);
  const deadline = Date.now() + SETTLE_BOUND_MS;
  let off: string[] = [];
  let left: Awaited<ReturnType<typeof expiredLeft>> = null;
  while (Date.now() < deadline) {
    off = await offClock(sys);
    left = off.length ? null : await expiredLeft(sys);
    if (!off.length && left?.events === 0 && left.messageIds === 0) break;
    await sleep(500);
  }
  if (off.length) return { settled: false, note: `not on the new time: ${off.join('; ')}` };
  if (!left) return { settled: false, note: 'PostgreSQL did not answer how much retention left' };
  if (left.events || left.messageIds)
    return {
      settled: false,
      note: `${SETTLE_BOUND_MS / 1000} s after the clock passed their retention, ${left.events} events and ${left.messageIds} messageId records (event_ids) of expired days were still stored`,
    };
  // A day ended moments ago: give retention its settling time past that boundary too.
  const sinceMidnight = sys.clock.now() % DAY_MS;
  if (sinceMidnight < RETENTION_SETTLE_MS) await sleep(RETENTION_SETTLE_MS - sinceMidnight);
  return { settled: true };
}

/** Moves the clock with the clients paused (the caller resumes them); `retention: false` waits only for the processes' clocks. */
export async function moveClock(sys: System, rec: Recorder, gate: Gate, days: number, { retention = true } = {}): Promise<ClockMove> {
  await gate.pause();
  const fromOffsetMs = sys.clock.offsetMs;
  const at = Date.now();
  sys.clock.forward(days);
  rec.setOffset(sys.clock.offsetMs);
  const { settled, note } = retention ? await settle(sys) : await onNewTime(sys);
  return rec.add({
    type: 'clock',
    id: rec.id(),
    fromOffsetMs,
    toOffsetMs: sys.clock.offsetMs,
    at,
    settledAt: settled ? Date.now() : null,
    ...(note ? { note } : {}),
  });
}

/** Waits until every process and server shows the new time (retention not awaited). */
async function onNewTime(sys: System): Promise<{ settled: boolean; note?: string }> {
  await sleep(CLOCK_FOLLOW_MS);
  const deadline = Date.now() + SETTLE_BOUND_MS;
  let off = await offClock(sys);
  while (off.length && Date.now() < deadline) {
    await sleep(500);
    off = await offClock(sys);
  }
  return off.length ? { settled: false, note: `not on the new time: ${off.join('; ')}` } : { settled: true };
}

export async function clockForward(sys: System, rec: Recorder, gate: Gate): Promise<void> {
  try {
    await moveClock(sys, rec, gate, 1);
  } finally {
    gate.resume();
  }
}

/**
 * Three days forward, then earlier events sent again and stored while no maintenance round can
 * run (the run holds its lock), then retention let go to catch up. Three days pass the one-day
 * retention of every event so far and the two days of partitions made ahead (system.ts), so the
 * workers also meet a day with no partition, under German server messages.
 */
export async function retentionResend(sys: System, rec: Recorder, gate: Gate, shared: Shared, step: Step, rng: Rng): Promise<void> {
  try {
    await gate.pause();
    const candidates = (['a', 'b'] as Org[]).flatMap((org) => shared.tracks[org].filter((op) => answered(op.outcome) && op.outcome.status === 202));
    const chosen = rng.shuffle(candidates).slice(0, step.resends);
    const held = await holdMaintenance(sys);
    let move: ClockMove | undefined;
    try {
      move = await moveClock(sys, rec, gate, RESEND_CLOCK_DAYS, { retention: false });
      const conns = new ClientConnections('resender');
      try {
        for (const original of chosen) {
          const target = rng.pick(targets(sys));
          await sendTrack(sys, rec, conns, target, original.org, original as TrackOp, original.id);
        }
      } finally {
        conns.close();
      }
      await drained(sys);
    } finally {
      await held.release();
    }
    // The move counts as settled once retention has caught up too, as every other move.
    const { settled, note } = await settle(sys);
    if (move.settledAt !== null) move.settledAt = settled ? Date.now() : null;
    if (note) move.note = note;
  } finally {
    gate.resume();
  }
}

/** Holds the workers' storage-maintenance lock on a connection of the run's own (a round in progress ends first). */
async function holdMaintenance(sys: System): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: sys.pg.primaryUrl(DATABASE) });
  await client.connect();
  await client.query('SELECT pg_advisory_lock($1)', [STORAGE_MAINTENANCE_LOCK]);
  return { release: () => client.end().catch(() => {}) };
}

/** Until the events queue holds nothing to do (bounded: a fault-free queue of a few events empties in moments). */
async function drained(sys: System): Promise<void> {
  const deadline = Date.now() + SETTLE_BOUND_MS;
  while (Date.now() < deadline && (await queueBacklog(sys)) !== 0) await sleep(250);
}
