import test from 'ava';
import { ConfigError, loadConfig } from '../../platform/config.ts';

test('defaults point at local services', (t) => {
  const config = loadConfig({});
  t.is(config.databaseUrl, 'postgresql://postgres@127.0.0.1:5432/intake');
  t.is(config.redisUrl, 'redis://127.0.0.1:6379');
  t.is(config.port, 3000);
});

test('every bad value is reported at once, each with its reason', (t) => {
  const err = t.throws(() => loadConfig({ PORT: 'abc', MAX_IN_FLIGHT: '-1', DATABASE_URL: 'nonsense', LOG_LEVEL: 'loud' }), { instanceOf: ConfigError });
  for (const part of ['PORT="abc": must be an integer', 'MAX_IN_FLIGHT="-1"', 'DATABASE_URL="nonsense": must be a URL', 'LOG_LEVEL="loud": must be one of'])
    t.true(err!.message.includes(part), part);
});

test('numbers are digits only: an empty value is not 0, nor are hex or padded values read', (t) => {
  for (const raw of ['', ' 3000 ', '0x0BB8', '3e3', '3000.0']) t.throws(() => loadConfig({ PORT: raw }), { instanceOf: ConfigError }, JSON.stringify(raw));
  t.is(loadConfig({ PORT: '0' }).port, 0);
});

test('an empty queue prefix or a URL without a host is refused; a socket directory is a host', (t) => {
  t.throws(() => loadConfig({ QUEUE_PREFIX: '' }), { message: /QUEUE_PREFIX="": must not be empty/ });
  t.throws(() => loadConfig({ DATABASE_URL: 'postgresql://' }), { message: /must name a host/ });
  t.is(loadConfig({ DATABASE_URL: 'postgresql:///intake?host=/var/run/postgresql' }).databaseUrl, 'postgresql:///intake?host=/var/run/postgresql');
});

test('EVENTS_RETENTION_DAYS is forever by default, or whole days; partitions ahead are at least 2 days', (t) => {
  t.is(loadConfig({}).eventsRetentionDays, null);
  t.is(loadConfig({ EVENTS_RETENTION_DAYS: '30' }).eventsRetentionDays, 30);
  for (const bad of ['0', '', 'never', '1.5', '-3']) {
    t.throws(() => loadConfig({ EVENTS_RETENTION_DAYS: bad }), { message: /EVENTS_RETENTION_DAYS=.*must be forever or an integer from 1 to 36500/ }, bad);
  }
  t.is(loadConfig({}).identifyIdempotencyDays, 7);
  t.is(loadConfig({}).eventPartitionsAheadDays, 3);
  t.throws(() => loadConfig({ EVENT_PARTITIONS_AHEAD_DAYS: '1' }), { message: /EVENT_PARTITIONS_AHEAD_DAYS="1": must be an integer from 2 to 60/ });
});

test('ADDRESS_HISTORY_DAYS keeps the address history forever by default, or whole days', (t) => {
  t.is(loadConfig({}).addressHistoryDays, null);
  t.is(loadConfig({ ADDRESS_HISTORY_DAYS: '365' }).addressHistoryDays, 365);
  for (const bad of ['0', '', 'never', '2.5']) {
    t.throws(() => loadConfig({ ADDRESS_HISTORY_DAYS: bad }), { message: /ADDRESS_HISTORY_DAYS=.*must be forever or an integer from 1 to 36500/ }, bad);
  }
});
