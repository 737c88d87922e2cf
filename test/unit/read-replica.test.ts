import test from 'ava';
import { createLagClock, type ReplicaState } from '../../platform/read-replica.ts';
import { fuller } from '../../platform/redis-memory.ts';

const standby = (replayLsn: bigint | null, sinceReplayMs: number | null = null): ReplicaState => ({ standby: true, replayLsn, sinceReplayMs });

test('replica lag: none once it has replayed the position the primary was just read at, however long since the primary last wrote', (t) => {
  const clock = createLagClock();
  // A replica just restarted on an idle primary: its last replayed transaction is ten minutes old, or unknown.
  t.is(clock.lag({ lsn: 5000n, at: 1000 }, standby(5000n, 600_000), 1001), 0);
  t.is(clock.lag({ lsn: 5000n, at: 2000 }, standby(5000n, null), 2001), 0);
  // Ahead of the reading (the primary wrote in between): nothing trails either.
  t.is(clock.lag({ lsn: 5000n, at: 3000 }, standby(6000n, null), 3001), 0);
});

test('replica lag: behind the primary, the time since the primary was last read at a position it has replayed', (t) => {
  const clock = createLagClock();
  t.is(clock.lag({ lsn: 100n, at: 0 }, standby(100n), 1), 0);
  t.is(clock.lag({ lsn: 200n, at: 1000 }, standby(100n, 600_000), 1001), 1001);
  t.is(clock.lag({ lsn: 300n, at: 2000 }, standby(100n, 600_000), 2001), 2001);
  // It reaches the second reading's position: the primary held nothing more at 1000.
  t.is(clock.lag({ lsn: 400n, at: 3000 }, standby(250n, 600_000), 3001), 2001);
  t.is(clock.lag({ lsn: 400n, at: 4000 }, standby(300n, 600_000), 4001), 2001);
  // The primary read again at the same position: the later reading counts once that position is replayed.
  t.is(clock.lag({ lsn: 400n, at: 5000 }, standby(399n, 600_000), 5001), 3001);
  t.is(clock.lag({ lsn: 500n, at: 6000 }, standby(400n, 600_000), 6001), 1001);
});

test('replica lag: behind a primary that commits all the time, the time since the last transaction it replayed, when that is less', (t) => {
  const clock = createLagClock();
  t.is(clock.lag({ lsn: 100n, at: 0 }, standby(100n), 1), 0);
  t.is(clock.lag({ lsn: 900n, at: 10_000 }, standby(850n, 40), 10_001), 40);
  t.is(clock.lag({ lsn: 950n, at: 20_000 }, standby(900n, 30_000), 20_001), 10_001);
});

test('replica lag: behind, with no earlier reading it reached and no transaction replayed since it started, unknown', (t) => {
  const clock = createLagClock();
  t.is(clock.lag({ lsn: 900n, at: 0 }, standby(100n, null), 1), Infinity);
  t.is(clock.lag({ lsn: 900n, at: 1000 }, standby(100n, 120_000), 1001), 120_000);
});

test('replica lag: while the primary does not answer, it grows from the last reading of the primary the replica reached', (t) => {
  const clock = createLagClock();
  t.is(clock.lag({ lsn: 100n, at: 0 }, standby(100n), 1), 0);
  t.is(clock.lag(null, standby(100n, null), 5000), 5000);
  t.is(clock.lag(null, standby(100n, 2000), 6000), 2000);
});

test('replica lag: a replica behind for long keeps a bounded history that never understates how far it trails', (t) => {
  const clock = createLagClock();
  t.is(clock.lag({ lsn: 0n, at: 0 }, standby(0n), 0), 0);
  for (let i = 1; i <= 5000; i++) t.is(clock.lag({ lsn: BigInt(i), at: i * 1000 }, standby(0n), i * 1000), i * 1000);
  // It catches up to the reading of time 3000 s: it trails by at most 2000 s, maybe a little more where readings were dropped.
  const lag = clock.lag({ lsn: 5001n, at: 5_001_000 }, standby(3000n), 5_001_000);
  t.true(lag >= 2_001_000 && lag <= 2_100_000, `${lag}`);
  t.is(clock.lag({ lsn: 5001n, at: 5_002_000 }, standby(5001n), 5_002_000), 0);
});

test('replica lag: a server that is not a standby reads its own writes', (t) => {
  const clock = createLagClock();
  t.is(clock.lag({ lsn: 900n, at: 0 }, { standby: false, replayLsn: null, sinceReplayMs: null }, 1), 0);
  t.is(clock.lag(null, { standby: false, replayLsn: 5n, sinceReplayMs: null }, 1), 0);
});

test('the fuller of two Redis masters: the larger share of maxmemory; one without maxmemory never counts as fuller', (t) => {
  const a = { usedBytes: 50, maxBytes: 100 };
  const b = { usedBytes: 90, maxBytes: 1000 };
  t.is(fuller(a, b), a);
  t.is(fuller(b, a), a);
  t.is(fuller(a, { usedBytes: 10_000, maxBytes: 0 }), a);
});
