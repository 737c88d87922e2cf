// The node-postgres internal db.ts relies on: a query's own `query_timeout` bounds that query on
// the client's side, whatever the client's. Fails when node-postgres stops reading it.
import test from 'ava';
import pg from 'pg';
import { withQueryTimeout } from '../../platform/db.ts';
import { TEST_DATABASE_URL } from '../helpers/services.ts';

test("a query's own query_timeout ends it on the client's side, before the client's bound", async (t) => {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString(), query_timeout: 60_000 });
  await client.connect();
  client.on('error', () => {});
  try {
    const started = Date.now();
    await t.throwsAsync(client.query(withQueryTimeout({ text: 'SELECT pg_sleep(3)' }, 200)), { message: 'Query read timeout' });
    t.true(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
  } finally {
    await client.end().catch(() => {});
  }
});
