import test from 'ava';
import { parseTimestamp } from '../../platform/validation/timestamp.ts';

const accepts = test.macro({
  exec(t, input: string, expectedIso: string) {
    const parsed = parseTimestamp(input);
    t.deepEqual(parsed, { ok: true, ms: Date.parse(expectedIso) });
  },
  title: (_provided, input: string) => `accepts ${JSON.stringify(input)}`,
});

const acceptsMs = test.macro({
  exec(t, input: string, expectedMs: number) {
    t.deepEqual(parseTimestamp(input), { ok: true, ms: expectedMs });
  },
  title: (_provided, input: string) => `accepts ${JSON.stringify(input)} (epoch ms)`,
});

const rejects = test.macro({
  exec(t, input: string, _why: string) {
    t.deepEqual(parseTimestamp(input), { ok: false });
  },
  title: (_provided, input: string, why: string) => `rejects ${JSON.stringify(input)}: ${why}`,
});

// Accepted forms of the spec. Expected values are written as canonical UTC
// (Date.parse is a trusted oracle for these plain forms).
test(accepts, '2024-01-15T10:30:00Z', '2024-01-15T10:30:00.000Z');
test(accepts, '2024-01-15T10:30:00.1Z', '2024-01-15T10:30:00.100Z');
test(accepts, '2024-01-15T10:30:00.12Z', '2024-01-15T10:30:00.120Z');
test(accepts, '2024-01-15T10:30:00.123Z', '2024-01-15T10:30:00.123Z');
test(accepts, '2024-01-15T10:30:00.123456789Z', '2024-01-15T10:30:00.123Z');
test(accepts, '2024-01-15T10:30:00.9999999Z', '2024-01-15T10:30:00.999Z');
test(accepts, '2024-01-15T10:30:00.5+02:00', '2024-01-15T08:30:00.500Z');
test(accepts, '2024-01-15T10:30:00+02:00', '2024-01-15T08:30:00.000Z');
test(accepts, '2024-01-15T10:30:00+0200', '2024-01-15T08:30:00.000Z');
test(accepts, '2024-01-15T10:30:00-05:30', '2024-01-15T16:00:00.000Z');
test(accepts, '2024-01-15T10:30:00-0530', '2024-01-15T16:00:00.000Z');
test(accepts, '2024-01-15T10:30:00+00:00', '2024-01-15T10:30:00.000Z');
test(accepts, '2024-01-15T10:30:00-00:00', '2024-01-15T10:30:00.000Z');
test(accepts, '2024-01-15T10:30Z', '2024-01-15T10:30:00.000Z');
test(accepts, '2024-01-15T10:30+02:00', '2024-01-15T08:30:00.000Z');
test(accepts, '2024-01-15T10:30-0100', '2024-01-15T11:30:00.000Z');
test(accepts, '2024-01-15T00:30:00+01:00', '2024-01-14T23:30:00.000Z');
test(accepts, '2024-12-31T23:59:59.999-23:59', '2025-01-01T23:58:59.999Z');
test(accepts, '2024-01-01T00:00:00+23:59', '2023-12-31T00:01:00.000Z');
test(accepts, '2024-02-29T12:00:00Z', '2024-02-29T12:00:00.000Z');
test(accepts, '2000-02-29T00:00:00Z', '2000-02-29T00:00:00.000Z');
test(accepts, '2024-04-30T00:00:00Z', '2024-04-30T00:00:00.000Z');
test(accepts, '2024-01-31T00:00:00Z', '2024-01-31T00:00:00.000Z');
test(accepts, '1969-12-31T23:59:59Z', '1969-12-31T23:59:59.000Z');
test(accepts, '9999-12-31T23:59:59Z', '9999-12-31T23:59:59.000Z');
// Years below 100 must not be shifted into the 1900s.
test(acceptsMs, '0000-01-01T00:00:00Z', -62_167_219_200_000);
test(acceptsMs, '0001-01-01T00:00:00Z', -62_135_596_800_000);
test(acceptsMs, '0050-03-01T00:00:00Z', -60_584_198_400_000);
test(acceptsMs, '0099-12-31T23:59:59.999Z', -59_011_459_200_001);
test(acceptsMs, '1970-01-01T00:00:00Z', 0);
test(acceptsMs, '1970-01-01T01:00:00+01:00', 0);

// Rejected forms of the spec, plus near misses.
test(rejects, '2024-01-15T10:30:00', 'no time zone');
test(rejects, '2024-01-15T10:30:00.123', 'fraction, no time zone');
test(rejects, '2024-01-15T10:30', 'no seconds, no time zone');
test(rejects, '2024-01-15 10:30:00Z', 'space instead of T');
test(rejects, '2024-01-15T10:30:00+02', 'hour-only offset');
test(rejects, '2024-01-15T10:30:00-05', 'hour-only negative offset');
test(rejects, '2024-01-15', 'date alone');
test(rejects, '2024-01-15Z', 'date alone with Z');
test(rejects, '2024-01-15t10:30:00Z', 'lowercase t');
test(rejects, '2024-01-15T10:30:00z', 'lowercase z');
test(rejects, '2024-02-30T00:00:00Z', 'February 30');
test(rejects, '2023-02-29T00:00:00Z', 'February 29 on a non-leap year');
test(rejects, '1900-02-29T00:00:00Z', 'February 29 on a century non-leap year');
test(rejects, '2024-04-31T00:00:00Z', 'April 31');
test(rejects, '2024-13-01T00:00:00Z', 'month 13');
test(rejects, '2024-00-10T00:00:00Z', 'month 00');
test(rejects, '2024-01-00T00:00:00Z', 'day 00');
test(rejects, '2024-01-32T00:00:00Z', 'day 32');
test(rejects, '1705314600000', 'epoch number as string');
test(rejects, '2024-01-15T24:00:00Z', 'hour 24');
test(rejects, '2024-01-15T10:60:00Z', 'minute 60');
test(rejects, '2016-12-31T23:59:60Z', 'second 60 (leap second)');
test(rejects, '2024-01-15T10:30:00+24:00', 'offset hour 24');
test(rejects, '2024-01-15T10:30:00+02:60', 'offset minute 60');
test(rejects, '2024-01-15T10:30:00+2:00', 'one-digit offset hour');
test(rejects, '2024-01-15T10:30:00+02:00:00', 'offset with seconds');
test(rejects, '2024-01-15T10:30:00 +02:00', 'space before offset');
test(rejects, '2024-01-15T10:30:00Z+02:00', 'Z and offset');
test(rejects, '2024-01-15T10:30:00UTC', 'zone name');
test(rejects, '2024-01-15T10:30:00.Z', 'empty fraction');
test(rejects, '2024-01-15T10:30:00,5Z', 'comma fraction');
test(rejects, '2024-01-15T10:30.5Z', 'fraction without seconds');
test(rejects, '2024-01-15T10Z', 'hour only');
test(rejects, '2024-1-15T10:30:00Z', 'one-digit month');
test(rejects, '24-01-15T10:30:00Z', 'two-digit year');
test(rejects, '+002024-01-15T10:30:00Z', 'expanded year');
test(rejects, '20240115T103000Z', 'basic (compact) format');
test(rejects, ' 2024-01-15T10:30:00Z', 'leading space');
test(rejects, '2024-01-15T10:30:00Z ', 'trailing space');
test(rejects, '2024-01-15T10:30:00Z\n', 'trailing newline');
test(rejects, '٢٠٢٤-01-15T10:30:00Z', 'non-ASCII digits');
test(rejects, '', 'empty string');
test(rejects, 'Mon, 15 Jan 2024 10:30:00 GMT', 'RFC 2822 date');

test('ms of a fraction is truncated, not rounded', (t) => {
  const a = parseTimestamp('2024-01-15T10:30:00.1239Z');
  const b = parseTimestamp('2024-01-15T10:30:00.123Z');
  t.true(a.ok && b.ok);
  t.deepEqual(a, b);
});
