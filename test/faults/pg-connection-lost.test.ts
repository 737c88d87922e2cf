// A connection lost while a caller holds it between statements (a transaction planning its
// write, a lock held across work) must fail that caller's next statement, not the process:
// node-postgres emits the loss on the client, and a client checked out of a pool has no
// listener of the pool's. Both kinds of pool the processes create (the read replica's is made
// by the same function).
import test from 'ava';
import type pg from 'pg';
import { createDb, createLockPool, poolOf } from '../../platform/db.ts';
import { createLogger } from '../../platform/logger.ts';
import { startProxy } from '../helpers/proxy.ts';
import { TEST_DATABASE_URL, migrateOnce } from '../helpers/services.ts';

const log = createLogger('silent', 'test');

async function lostWhileHeld(t: import('ava').ExecutionContext, open: (url: string) => { pool: pg.Pool; close(): Promise<void> }) {
  const proxy = await startProxy(TEST_DATABASE_URL);
  const { pool, close } = open(proxy.url(TEST_DATABASE_URL));
  t.teardown(async () => {
    await close();
    await proxy.close();
  });
  const held = await pool.connect();
  await held.query('BEGIN');
  proxy.cut();
  // The loss reaches the client while it runs no statement.
  await new Promise((resolve) => setTimeout(resolve, 300));
  await t.throwsAsync(held.query('SELECT 1'));
  held.release(true);
  proxy.restore();
  t.is((await pool.query<{ n: number }>('SELECT 1 AS n')).rows[0].n, 1, 'the pool serves again once PostgreSQL is back');
}

test.before(() => migrateOnce());

test("createDb's pool: a held connection lost fails its next statement, the process goes on", (t) =>
  lostWhileHeld(t, (url) => {
    const db = createDb({ databaseUrl: url, databasePoolSize: 2 }, log);
    return { pool: poolOf(db), close: () => db.$disconnect() };
  }));

test('the lock pool: the same', (t) =>
  lostWhileHeld(t, (url) => {
    const pool = createLockPool({ databaseUrl: url }, 2, log);
    return { pool, close: () => pool.end() };
  }));
