// The clock the service trusts: PostgreSQL's. Every gateway and worker keeps the difference
// between its own clock and the database's, measured when it starts and every MEASURE_MS, so that the times it stamps and the days it makes partitions for
// agree across hosts whose clocks drift: an erasure's time is the database's, retention counts
// days on it, and a host whose clock runs days ahead cannot create a partition that retention
// will not reach until then. While the database does not answer, the last difference stands.
import type pg from 'pg';
import type { Logger } from './logger.ts';

export interface TrustedClock {
  /** The database's time now, in epoch ms, as this process's clock and the last difference say. */
  now(): number;
  /** This process's clock minus the database's, at the last reading (ms). */
  offsetMs(): number;
  close(): void;
}

/** How often the difference is read again: clocks drift by milliseconds an hour, hosts are moved by NTP or by hand. */
const MEASURE_MS = 30_000;

/** A difference past this is logged once per change: a host's clock should not be that far off. */
const WARN_OFFSET_MS = 60_000;

/**
 * This host's clock minus the database's, from one reading: the least difference the reading
 * allows. The database read its clock at some moment of the round trip, so the difference lies
 * between `sent - read` and `received - read` (a millisecond wider: the reading is floored); when
 * that range holds 0 the clocks agree as far as can be told, and no correction is made (a busy
 * event loop lengthens the round trip, and a midpoint would then invent a difference).
 */
export async function measureOffset(pool: Pick<pg.Pool, 'query'>): Promise<number> {
  const sent = Date.now();
  const { rows } = await pool.query<{ now: string }>('SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8::text AS now');
  const received = Date.now();
  const read = Number(rows[0].now);
  const low = sent - read - 1;
  const high = received - read;
  return low > 0 ? low : high < 0 ? high : 0;
}

/** Two readings of one difference agree within this (each is within a round trip of the truth). */
const AGREE_MS = 1_000;

/** How long after a reading that changes the difference it is read again, to confirm it. */
const CONFIRM_MS = 2_000;

/**
 * A clock that follows the database's; resolves once the first reading is taken (or failed: then
 * this process's own clock). A reading that changes the difference is adopted only when a second
 * one CONFIRM_MS later agrees: a clock being stepped (by NTP or by hand, on this host or the
 * database's) can be read mid-step, with one side moved and the other not yet, and that
 * difference stamped on every receipt would be a lie for the whole MEASURE_MS.
 */
export async function createTrustedClock(
  pool: Pick<pg.Pool, 'query'>,
  log?: Logger,
  { measureMs = MEASURE_MS, confirmMs = CONFIRM_MS }: { measureMs?: number; confirmMs?: number } = {},
): Promise<TrustedClock> {
  let offset = 0;
  let warned = false;
  const adopt = (reading: number) => {
    offset = reading;
    const far = Math.abs(offset) > WARN_OFFSET_MS;
    if (far && !warned) log?.warn({ offsetMs: offset }, "this host's clock is far from PostgreSQL's: times follow PostgreSQL's");
    warned = far;
  };
  const measure = async () => {
    try {
      const reading = await measureOffset(pool);
      if (Math.abs(reading - offset) <= AGREE_MS) return adopt(reading);
      await new Promise((r) => setTimeout(r, confirmMs));
      const again = await measureOffset(pool);
      if (Math.abs(again - reading) <= AGREE_MS) adopt(again);
    } catch {
      // The last difference stands; the next reading tries again.
    }
  };
  await measure();
  const timer = setInterval(() => void measure(), measureMs);
  timer.unref();
  return { now: () => Date.now() - offset, offsetMs: () => offset, close: () => clearInterval(timer) };
}
