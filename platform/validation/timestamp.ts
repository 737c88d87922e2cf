// The shared timestamp format of the spec: ISO 8601 date-time with a mandatory
// time zone designator. Parsed by hand (not Date.parse) so that the accepted
// set is exactly the documented one and nonexistent dates are rejected.

export type ParsedTimestamp = { ok: true; ms: number } | { ok: false };

// Groups: 1 year, 2 month, 3 day, 4 hour, 5 minute, 6 second, 7 fraction,
// 8 zone (Z or offset), 9 offset sign, 10 offset hours, 11 offset minutes.
// Seconds are optional; a fraction only follows seconds. No `i` flag: lowercase
// `t`/`z` are rejected. `$` without `m` does not match before a trailing newline.
const TIMESTAMP_RE = /^(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(?:\.(\d+))?)?(Z|([+-])([01]\d|2[0-3]):?([0-5]\d))$/;

const NOT_OK: ParsedTimestamp = { ok: false };

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isLeapYear(y: number): boolean {
  return y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
}

function daysInMonth(y: number, month: number): number {
  return month === 2 && isLeapYear(y) ? 29 : DAYS_IN_MONTH[month - 1];
}

export function parseTimestamp(value: string): ParsedTimestamp {
  const m = TIMESTAMP_RE.exec(value);
  if (m === null) return NOT_OK;

  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  // The regex only bounds the day to 01-31; the calendar decides the rest.
  if (day > daysInMonth(year, month)) return NOT_OK;

  const seconds = m[6] === undefined ? 0 : Number(m[6]);
  // Precision beyond milliseconds is truncated, not rounded.
  const fraction = m[7];
  const millis = fraction === undefined ? 0 : Number((fraction + '00').slice(0, 3));

  // Date.UTC maps years 0-99 to 1900-1999; setUTCFullYear does not.
  const date = new Date(Date.UTC(2000, 0, 1, Number(m[4]), Number(m[5]), seconds, millis));
  date.setUTCFullYear(year, month - 1, day);

  let offsetMinutes = 0;
  if (m[8] !== 'Z') {
    offsetMinutes = Number(m[10]) * 60 + Number(m[11]);
    if (m[9] === '-') offsetMinutes = -offsetMinutes;
  }
  return { ok: true, ms: date.getTime() - offsetMinutes * 60_000 };
}
