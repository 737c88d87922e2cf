import test from 'ava';
import { pino } from 'pino';
import { infoLine, infoMembers, LineBatch, loggerTo, plainJson, type PlainFields } from '../../platform/logger.ts';

/** A logger as createLogger makes it, writing its lines to an array. */
function captured(level = 'info') {
  const chunks: string[] = [];
  const lines = new LineBatch({ write: (c: string) => (chunks.push(c), true), flush: (cb?: (err?: Error) => void) => cb?.() }, 1);
  return { log: loggerTo(lines, level, 'gw-test'), lines: () => chunks.join('').split('\n').filter(Boolean) };
}

/** A line without its time member (the two writers may read the clock in different milliseconds). */
const untimed = (line: string) => line.replace(/,"time":"[^"]*"/, '');

const cases: PlainFields[] = [
  { requestId: '3d408e61-0993-4596-95be-ec6b126eb149', method: 'POST', route: 'identify', status: 200, ms: 2.85 },
  { requestId: 'x', method: 'GET', route: null, status: 404, ms: 0 },
  { text: 'quote " backslash \\ newline \n tab \t nul \u0000 é 😀 lone \ud800', ok: true, n: -1.5e-7, inf: Infinity, nan: NaN },
];

for (const [i, fields] of cases.entries()) {
  test(`infoLine writes the line pino writes for the same fields (${i})`, (t) => {
    const { log, lines } = captured();
    log.info(fields);
    infoLine(log)(fields);
    const [viaPino, viaInfoLine] = lines();
    t.truthy(viaInfoLine);
    t.is(untimed(viaInfoLine), untimed(viaPino));
    t.regex(viaInfoLine, /^\{"level":30,"time":"\d{4}-\d\d-\d\dT[^"]+Z","process":"gw-test","pid":\d+,"name":"gw-test",/);
  });
}

test('infoLine writes nothing below the info level', (t) => {
  const { log, lines } = captured('warn');
  infoLine(log)({ status: 200 });
  t.deepEqual(lines(), []);
});

test('a logger made elsewhere gets log.info', (t) => {
  const chunks: string[] = [];
  const log = pino({ base: null, timestamp: false }, { write: (c: string) => chunks.push(c) });
  infoLine(log)({ status: 201, route: null });
  t.deepEqual(
    chunks.map((c) => JSON.parse(c)),
    [{ level: 30, status: 201, route: null }],
  );
});

test('infoMembers writes the line pino writes for the same members', (t) => {
  const { log, lines } = captured();
  const fields = { requestId: 'ab12-1z', method: 'POST', route: 'track', status: 202, ms: 0.41, refusal: 'Reserved "event" name' };
  log.info(fields);
  let members = '';
  for (const [key, value] of Object.entries(fields)) members += `,"${key}":${plainJson(value)}`;
  infoMembers(log)!.write(members);
  const [viaPino, viaMembers] = lines();
  t.is(untimed(viaMembers), untimed(viaPino));
});
