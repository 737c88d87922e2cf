// Which PostgreSQL refusals make an event poison (bisected out to the dead-letter queue) and
// which fail the whole batch for a retry with backoff.
import test from 'ava';
import {
  dbErrorMessage,
  isDataError,
  isNoPartitionFor,
  isWriteConflict,
  LARGE_STATEMENT_CHARS,
  QUERY_TIMEOUT_MS,
  queryTimeoutFor,
  retrying,
  splitOnRefusal,
  sqlState,
} from '../../platform/db.ts';

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

test('node-postgres gives the SQLSTATE as code: the same rules read it', async (t) => {
  const { DatabaseError } = await import('pg');
  const answer = (code: string) => Object.assign(new DatabaseError('refused', 0, 'error'), { code, severity: 'ERROR' });
  t.is(sqlState(answer('23505')), '23505');
  t.true(isDataError(answer('P0001')));
  t.true(isDataError(answer('21000')), 'one statement touching a row twice');
  t.false(isDataError(answer('57014')));
  t.true(isWriteConflict(answer('40P01')));
  t.true(isWriteConflict(refused('40001', 'x')));
  t.false(isWriteConflict(answer('23505')));
  t.is(sqlState(Object.assign(new Error('Transaction failed'), { code: 'P2034' })), null, "Prisma's own code is not an SQLSTATE");
  t.true(isWriteConflict(Object.assign(new Error('Transaction failed'), { code: 'P2034' })));
});

test('retrying: again while retryable, up to the attempts, then the last error', async (t) => {
  let calls = 0;
  t.is(
    await retrying(
      async () => (++calls < 3 ? Promise.reject(new Error('conflict')) : 'done'),
      5,
      () => true,
      1,
    ),
    'done',
  );
  t.is(calls, 3);
  calls = 0;
  await t.throwsAsync(
    retrying(
      async () => Promise.reject(new Error(`try ${++calls}`)),
      4,
      () => true,
      1,
    ),
    { message: 'try 4' },
  );
  calls = 0;
  await t.throwsAsync(
    retrying(
      async () => Promise.reject(new Error(`try ${++calls}`)),
      4,
      () => false,
      1,
    ),
    { message: 'try 1' },
  );
});

test("node-postgres's own refusal reads as Prisma's does: its SQLSTATE, a data error or not, and the database's words", (t) => {
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'ERROR', length: 100 });
  t.is(sqlState(pgError('23514', 'no partition of relation "events" found for row')), '23514');
  t.true(isDataError(pgError('22021', 'invalid byte sequence')));
  t.false(isDataError(pgError('57014', 'canceling statement due to statement timeout')));
  t.is(dbErrorMessage(pgError('23514', 'x')), '23514: x');
  // A connection error carries a code too, but no severity: not an answer from PostgreSQL.
  t.is(sqlState(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })), null);
});

test('no partition for a row: SQLSTATE 23514 naming the partitioned table and no constraint, whatever the words', async (t) => {
  const { DatabaseError } = await import('pg');
  // node-postgres's error as its parser builds it: the message in the server's lc_messages, the
  // SQLSTATE and the table (errtable) as sent. The real server's: test/unit/error-classes.test.ts.
  const refusal = (message: string, fields: { table?: string; constraint?: string }) =>
    Object.assign(new DatabaseError(message, 0, 'error'), { code: '23514', severity: 'ERROR', schema: 'public', ...fields });
  t.true(isNoPartitionFor(refusal('keine Partition von Relation »events« für die Zeile gefunden', { table: 'events' }), 'events'));
  t.true(isNoPartitionFor(refusal('no partition of relation "events" found for row', { table: 'events' }), 'events'));
  t.false(
    isNoPartitionFor(
      refusal('neue Zeile für Relation »events_20260101« verletzt Check-Constraint »poison«', { table: 'events_20260101', constraint: 'poison' }),
      'events',
    ),
  );
  t.false(isNoPartitionFor(refusal('new row for relation "events" violates check constraint "poison"', { table: 'events', constraint: 'poison' }), 'events'));
  t.false(isNoPartitionFor(refusal('no partition of relation "events" found for row', { table: 'event_ids' }), 'events'));
  t.false(isNoPartitionFor(Object.assign(refusal('x', { table: 'events' }), { code: '23505' }), 'events'));
  t.false(isNoPartitionFor(refused('23514', 'no partition of relation "events" found for row'), 'events'), "Prisma's adapter keeps no table");
  t.false(isNoPartitionFor(null, 'events'));
});

test('splitOnRefusal: a refused set is halved in order until the refused item stands alone; the rest keep their outcomes', async (t) => {
  const poison = Object.assign(new Error('poison'), { code: '23514', severity: 'ERROR' });
  const parts: string[][] = [];
  const apply = async (part: string[]) => {
    parts.push(part);
    if (part.includes('bad')) throw poison;
    return part.map((x) => x.toUpperCase());
  };
  t.deepEqual(await splitOnRefusal(['a', 'b', 'bad', 'c', 'd'], apply), ['A', 'B', poison, 'C', 'D']);
  t.deepEqual(parts[0], ['a', 'b', 'bad', 'c', 'd']);
  t.deepEqual(
    parts.slice(1, 3),
    [
      ['a', 'b', 'bad'],
      ['a', 'b'],
    ],
    'the first half runs before the second',
  );
  t.true(parts.length <= 2 * Math.ceil(Math.log2(5)) + 1);
  t.deepEqual(await splitOnRefusal([], apply), []);
});

test('splitOnRefusal: a failure that is not a refusal is thrown at once, unsplit', async (t) => {
  let calls = 0;
  const down = new Error('Connection terminated unexpectedly');
  await t.throwsAsync(
    splitOnRefusal(['a', 'b', 'c'], async () => {
      calls++;
      throw down;
    }),
    { is: down },
  );
  t.is(calls, 1);
  t.deepEqual(
    await splitOnRefusal(
      ['x', 'y'],
      async (p) => (p.includes('y') ? Promise.reject(down) : p),
      (err) => err === down,
    ),
    ['x', down],
  );
});
