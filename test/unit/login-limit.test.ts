import test from 'ava';
import { LOGIN_LIMITS, loginLimitKeys, waitOf } from '../../gateway/console/login-limit.ts';
import { keySlot } from '../../platform/queue-keys.ts';

const limits = { perName: 5, perAddress: 20, windowMs: 900_000 };
const none = { address: 0, addressTtlMs: -2, name: 0, nameTtlMs: -2 };

test('the limits: 5 failures per name, 20 per address, in windows of 15 minutes', (t) => {
  t.deepEqual(LOGIN_LIMITS, limits);
});

test('below both limits a login may be tried now', (t) => {
  t.is(waitOf(limits, none), 0);
  t.is(waitOf(limits, { address: 19, addressTtlMs: 1000, name: 4, nameTtlMs: 1000 }), 0);
});

test('at either limit it waits for the rest of that window, the longer when both are reached', (t) => {
  t.is(waitOf(limits, { ...none, name: 5, nameTtlMs: 12_345 }), 12_345);
  t.is(waitOf(limits, { ...none, address: 20, addressTtlMs: 600 }), 600);
  t.is(waitOf(limits, { address: 25, addressTtlMs: 600, name: 5, nameTtlMs: 9000 }), 9000);
});

test('a key at its limit with no expiry waits a whole window, not forever', (t) => {
  t.is(waitOf(limits, { ...none, name: 5, nameTtlMs: -1 }), limits.windowMs);
});

test('keys: under the queue prefix, the name lower-cased and hashed; on a cluster one hash tag for both', (t) => {
  const single = loginLimitKeys({ queuePrefix: 'intake', redisClusterNodes: [] }, '10.0.0.1', 'Alice');
  t.is(single.address, 'intake:login:address:10.0.0.1');
  t.regex(single.name, /^intake:login:name:[A-Za-z0-9_-]{22}$/);
  t.false(single.name.toLowerCase().includes('alice'));
  t.is(loginLimitKeys({ queuePrefix: 'intake' }, '10.0.0.1', 'aLiCe').name, single.name);
  t.not(loginLimitKeys({ queuePrefix: 'intake' }, '10.0.0.1', 'bob').name, single.name);
  t.is(loginLimitKeys({ queuePrefix: 'intake' }, '10.0.0.1', 'x'.repeat(10_000)).name.length, single.name.length);
  const cluster = loginLimitKeys({ queuePrefix: 'intake', redisClusterNodes: ['127.0.0.1:7000'] }, '::1', 'alice');
  t.true(cluster.address.startsWith('{intake:login}:address:'));
  t.is(keySlot(cluster.address), keySlot(cluster.name));
});
