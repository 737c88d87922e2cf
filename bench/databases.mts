// The databases the bench scenarios make for themselves: dropped at the end of a run (npm run
// bench's at the start of the next), whoever is still connected (a process the run killed may
// hold a connection until PostgreSQL notices).
import pg from 'pg';

/** Drops the database that `url` names, connecting to `postgres` on the same server to do it. */
export async function dropDatabase(url: string): Promise<void> {
  const admin = new URL(url);
  const name = decodeURIComponent(admin.pathname.slice(1));
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${name.replaceAll('"', '""')}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}
