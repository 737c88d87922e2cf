// The trusted clock follows PostgreSQL's: against the real server its difference from this
// host's clock is small; a database whose clock is elsewhere moves now() with it, and a reading
// that fails keeps the last difference.
import test from 'ava';
import pg from 'pg';
import { createTrustedClock, measureOffset } from '../../platform/trusted-clock.ts';
import { TEST_DATABASE_URL } from '../helpers/services.ts';

test("against the real PostgreSQL on this host, the difference is within the round trip and now() is this host's time", async (t) => {
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 1 });
  t.teardown(() => pool.end());
  t.true(Math.abs(await measureOffset(pool)) < 1000);
  const clock = await createTrustedClock(pool);
  t.teardown(() => clock.close());
  t.true(Math.abs(clock.now() - Date.now()) < 1000);
});

test('now() follows a database clock twenty days behind, and keeps the last difference while the database does not answer', async (t) => {
  const behind = 20 * 86_400_000;
  let answering = true;
  // The server's answer to the clock query, as node-postgres returns it, from a clock twenty days behind.
  const pool = {
    query: async () => {
      if (!answering) throw new Error('connect ECONNREFUSED');
      return { rows: [{ now: String(Date.now() - behind) }] };
    },
  } as unknown as pg.Pool;
  const clock = await createTrustedClock(pool, undefined, { measureMs: 20, confirmMs: 5 });
  t.teardown(() => clock.close());
  t.true(Math.abs(clock.offsetMs() - behind) < 1000);
  t.true(Math.abs(clock.now() - (Date.now() - behind)) < 1000);
  answering = false;
  await new Promise((r) => setTimeout(r, 60));
  t.true(Math.abs(clock.offsetMs() - behind) < 1000);
});

test('a slow round trip to a database whose clock agrees with this host makes no correction at all', async (t) => {
  // Read at the start of a round trip that then takes 200 ms (a busy event loop, a slow network).
  const pool = {
    query: async () => {
      const read = Date.now();
      await new Promise((r) => setTimeout(r, 200));
      return { rows: [{ now: String(read) }] };
    },
  } as unknown as pg.Pool;
  t.is(await measureOffset(pool), 0);
});

test('a reading taken mid-step (one clock moved, the other not yet) is not adopted unless the next one agrees', async (t) => {
  const day = 86_400_000;
  // The database's clock reads three days ahead once, then agrees with this host again.
  const readings = [0, 3 * day, 0];
  let n = 0;
  const pool = { query: async () => ({ rows: [{ now: String(Date.now() + readings[Math.min(n++, readings.length - 1)]) }] }) } as unknown as pg.Pool;
  const clock = await createTrustedClock(pool, undefined, { measureMs: 30, confirmMs: 5 });
  t.teardown(() => clock.close());
  t.is(clock.offsetMs(), 0);
  await new Promise((r) => setTimeout(r, 100));
  t.is(clock.offsetMs(), 0);
  t.true(n >= 3);
});

test('a step of the clocks that stays is adopted once confirmed', async (t) => {
  const day = 86_400_000;
  let ahead = 0;
  const pool = { query: async () => ({ rows: [{ now: String(Date.now() + ahead) }] }) } as unknown as pg.Pool;
  const clock = await createTrustedClock(pool, undefined, { measureMs: 20, confirmMs: 5 });
  t.teardown(() => clock.close());
  ahead = 3 * day;
  await new Promise((r) => setTimeout(r, 100));
  t.true(Math.abs(clock.offsetMs() + 3 * day) < 1000);
});
