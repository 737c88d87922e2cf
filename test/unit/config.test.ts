import test from 'ava';
import { ConfigError, loadConfig } from '../../common/config.ts';

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
