import test from 'ava';
import { replicaLagMs } from '../../common/read-replica.ts';
import { fuller } from '../../common/redis-memory.ts';

test('replica lag: none while streaming and caught up, however long since the last transaction (an idle primary)', (t) => {
  t.is(replicaLagMs({ standby: true, receiver: 'streaming', caughtUp: true, sinceReplayMs: 600_000 }), 0);
});

test('replica lag: the time since the last replayed transaction while replay is behind or the primary is out of reach', (t) => {
  t.is(replicaLagMs({ standby: true, receiver: 'streaming', caughtUp: false, sinceReplayMs: 4200 }), 4200);
  t.is(replicaLagMs({ standby: true, receiver: null, caughtUp: true, sinceReplayMs: 90_000 }), 90_000);
  t.is(replicaLagMs({ standby: true, receiver: 'waiting', caughtUp: null, sinceReplayMs: null }), Infinity);
});

test('replica lag: a server that is not a standby reads its own writes', (t) => {
  t.is(replicaLagMs({ standby: false, receiver: null, caughtUp: null, sinceReplayMs: null }), 0);
});

test('the fuller of two Redis masters: the larger share of maxmemory; one without maxmemory never counts as fuller', (t) => {
  const a = { usedBytes: 50, maxBytes: 100 };
  const b = { usedBytes: 90, maxBytes: 1000 };
  t.is(fuller(a, b), a);
  t.is(fuller(b, a), a);
  t.is(fuller(a, { usedBytes: 10_000, maxBytes: 0 }), a);
});
