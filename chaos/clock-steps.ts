// Clock moves: the clients quiesce, the offset file moves every process forward by whole days,
// and the run waits until every process and both PostgreSQL servers show the new time and
// retention has dropped what is now past it; then the clients go on. The retention scenario
// also sends earlier events again once their day has passed the retention: the product stores
// such a resend as a new event.
import { CLOCK_FOLLOW_MS, DAY_MS } from './clock.ts';
import type { Gate } from './gate.ts';
import type { ClockMove, Org, Recorder, TrackOp } from './history.ts';
import { answered } from './history.ts';
import { ClientConnections } from './http-client.ts';
import { expiredLeft, offClock } from './observe.ts';
import type { Step } from './plan.ts';
import type { Rng } from './prng.ts';
import { sendTrack, sleep, targets, type Shared } from './generator.ts';
import { RETENTION_SETTLE_MS } from './checker/model.ts';
import type { System } from './system.ts';

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

/** Moves the clock with the clients paused (the caller resumes them). */
export async function moveClock(sys: System, rec: Recorder, gate: Gate, days: number): Promise<ClockMove> {
  await gate.pause();
  const fromOffsetMs = sys.clock.offsetMs;
  const at = Date.now();
  sys.clock.forward(days);
  rec.setOffset(sys.clock.offsetMs);
  const { settled, note } = await settle(sys);
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

export async function clockForward(sys: System, rec: Recorder, gate: Gate): Promise<void> {
  try {
    await moveClock(sys, rec, gate, 1);
  } finally {
    gate.resume();
  }
}

/** Two days forward (past the one-day retention of every event so far), then earlier events sent again. */
export async function retentionResend(sys: System, rec: Recorder, gate: Gate, shared: Shared, step: Step, rng: Rng): Promise<void> {
  try {
    await gate.pause();
    const candidates = (['a', 'b'] as Org[]).flatMap((org) => shared.tracks[org].filter((op) => answered(op.outcome) && op.outcome.status === 202));
    const chosen = rng.shuffle(candidates).slice(0, step.resends);
    await moveClock(sys, rec, gate, 2);
    const conns = new ClientConnections('resender');
    try {
      for (const original of chosen) {
        const target = rng.pick(targets(sys));
        await sendTrack(sys, rec, conns, target, original.org, original as TrackOp, original.id);
      }
    } finally {
      conns.close();
    }
  } finally {
    gate.resume();
  }
}
