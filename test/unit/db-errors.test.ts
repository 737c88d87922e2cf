// Which PostgreSQL refusals make an event poison (bisected out to the dead-letter queue) and
// which fail the whole batch for a retry with backoff.
import test from 'ava';
import { dbErrorMessage, isDataError, LARGE_STATEMENT_CHARS, QUERY_TIMEOUT_MS, queryTimeoutFor, sqlState } from '../../common/db.ts';

/** The shape of Prisma's P2010 for a raw query PostgreSQL refused (checked against Prisma 7 + adapter-pg). */
const refused = (code: string, message: string) =>
  Object.assign(new Error(`Invalid \`prisma.$executeRaw()\` invocation: Raw query failed. Code: \`${code}\`.`), {
    code: 'P2010',
    meta: { driverAdapterError: { name: 'DriverAdapterError', cause: { originalCode: code, originalMessage: message, kind: 'postgres' } } },
  });

for (const [code, data] of [
  ['23514', true], // check constraint
  ['23502', true], // not null
  ['22021', true], // invalid byte sequence
  ['54000', true], // index row too large
  ['P0001', true], // a trigger's RAISE
  ['40P01', false], // deadlock: may pass on a retry
  ['57014', false], // statement timeout
  ['08006', false], // connection failure
  ['42P01', false], // missing table: not the data's fault
] as const) {
  test(`SQLSTATE ${code} is ${data ? '' : 'not '}a refusal for the data`, (t) => {
    t.is(isDataError(refused(code, 'x')), data);
    t.is(sqlState(refused(code, 'x')), code);
  });
}

test('no answer from PostgreSQL is never a data error', (t) => {
  t.false(isDataError(new Error('Connection terminated unexpectedly')));
  t.false(isDataError(null));
  t.is(sqlState(new Error('timeout')), null);
});

test("the database's own words, without Prisma's invocation text", (t) => {
  t.is(
    dbErrorMessage(refused('23514', 'new row for relation "events" violates check constraint "poison"')),
    '23514: new row for relation "events" violates check constraint "poison"',
  );
  t.is(dbErrorMessage(new Error('Connection terminated')), 'Connection terminated');
});

test('queryTimeoutFor: an ordinary statement keeps the pool bound (no SET LOCAL round trip); a large one gets 5 s a megabyte more', (t) => {
  t.is(queryTimeoutFor(0), QUERY_TIMEOUT_MS);
  t.is(queryTimeoutFor(LARGE_STATEMENT_CHARS), QUERY_TIMEOUT_MS);
  t.true(queryTimeoutFor(LARGE_STATEMENT_CHARS + 1) > QUERY_TIMEOUT_MS);
  t.is(queryTimeoutFor(4_000_000), QUERY_TIMEOUT_MS + 20_000);
});
