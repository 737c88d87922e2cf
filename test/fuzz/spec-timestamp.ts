// The spec's shared timestamp format, read from its text independently of the service's
// parser: the accepted forms it lists, and its rejected ones. Cases the text leaves open
// (hour 24, second 60, offsets beyond ±14:00) are `unknown`, and the fuzz then checks only
// the response's shape.
export type TimestampVerdict = { ok: true; ms: number } | { ok: false } | 'unknown';

const FORM = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(?:Z|([+-])(\d{2}):?(\d{2}))$/;
const INVALID = { ok: false } as const;

const daysIn = (year: number, month: number) => new Date(Date.UTC(2000, month, 0)).getUTCDate() - (month === 2 && !leap(year) ? 1 : 0);
const leap = (y: number) => y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);

export function specTimestamp(value: string): TimestampVerdict {
  const m = FORM.exec(value);
  if (!m) return INVALID;
  const [year, month, day, hour, minute] = [1, 2, 3, 4, 5].map((i) => Number(m[i]));
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || minute > 59) return INVALID;
  if (hour > 23 || second > 59) return hour === 24 || second === 60 ? 'unknown' : INVALID;
  const offsetHours = m[9] === undefined ? 0 : Number(m[9]);
  const offsetMinutes = m[10] === undefined ? 0 : Number(m[10]);
  if (offsetHours > 14 || offsetMinutes > 59) return 'unknown';
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, millis);
  const sign = m[8] === '-' ? -1 : 1;
  return { ok: true, ms: date.getTime() - sign * (offsetHours * 60 + offsetMinutes) * 60_000 };
}
