// A database of its own at the schema just before one migration, for the tests of what that
// migration does to existing rows: they fill it as the older code wrote, then migrate on.
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { ExecutionContext } from 'ava';
import pg from 'pg';
import { migrationsDir } from '../../cli/migrate.ts';
import { TEST_DATABASE_URL } from './services.ts';

export interface MigrationDatabase {
  pool: pg.Pool;
  /** Applies `migration` alone. */
  applyMigration(): Promise<void>;
  /** Applies `migration` and every later one. */
  applyRest(): Promise<void>;
}

export async function databaseBefore(t: ExecutionContext, migration: string, tag: string): Promise<MigrationDatabase> {
  const url = new URL(TEST_DATABASE_URL);
  const name = `${url.pathname.slice(1)}_${tag}_${process.pid}`;
  const admin = new pg.Client({ connectionString: Object.assign(new URL(url), { pathname: '/postgres' }).toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${name}"`);
  await admin.query(`CREATE DATABASE "${name}"`);
  const pool = new pg.Pool({ connectionString: Object.assign(new URL(url), { pathname: `/${name}` }).toString(), max: 2 });
  t.teardown(async () => {
    await pool.end();
    // A connection the test closed may still be leaving the server: try again for a few seconds.
    for (let attempt = 1; ; attempt++) {
      try {
        await admin.query(`DROP DATABASE IF EXISTS "${name}"`);
        break;
      } catch (err) {
        if (attempt >= 50 || !/being accessed by other users/.test((err as Error).message)) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    await admin.end();
  });

  const dirs = (await readdir(migrationsDir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  const apply = async (names: string[]) => {
    for (const dir of names) await pool.query(await readFile(path.join(migrationsDir, dir, 'migration.sql'), 'utf8'));
  };
  await apply(dirs.filter((d) => d < migration));
  return { pool, applyMigration: () => apply([migration]), applyRest: () => apply(dirs.filter((d) => d >= migration)) };
}
