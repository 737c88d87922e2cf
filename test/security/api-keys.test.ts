// API keys are secrets shown once: `intake key create` prints the key and stores only its
// SHA-256 (no column of any table holds the key or most of it; the five-character suffix is
// stored on purpose, for key management); `intake key list` and `key revoke` never print it.
import { createHash } from 'node:crypto';
import test from 'ava';
import pg from 'pg';
import { orgCreate } from '../../cli/commands/org.ts';
import { openHarness, TEST_DATABASE_URL, uniqueSlug, type Harness } from '../helpers/services.ts';
import { intake } from './cli.ts';

let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => h?.close());

/** The part of a key that must appear nowhere: all of it but the stored suffix. */
const secretPart = (key: string) => key.slice(0, -5);

test('key create prints the key once; the database holds only its SHA-256 and suffix', async (t) => {
  const slug = uniqueSlug();
  await orgCreate(h.operator, [slug]);
  const created = await intake(h.env, ['key', 'create', slug]);
  t.is(created.code, 0, created.stderr);
  const printed = JSON.parse(created.stdout);
  t.deepEqual(Object.keys(printed).sort(), ['environment', 'key', 'status', 'suffix']);
  const key: string = printed.key;
  t.regex(key, /^itk_[0-9A-Za-z]{40}$/);
  t.is(printed.suffix, key.slice(-5));

  const rows = await h.db.$queryRaw<Record<string, unknown>[]>`
    SELECT k.* FROM api_keys k JOIN environments e ON e.id = k.environment_id WHERE e.path_value = ${slug}`;
  t.is(rows.length, 1);
  const row = rows[0];
  t.is(row.hash, createHash('sha256').update(key).digest('hex'));
  t.is(row.suffix, key.slice(-5));
  for (const [column, value] of Object.entries(row)) {
    t.false(String(value).includes(secretPart(key)), `api_keys.${column} holds the key`);
    t.false(String(value).includes(secretPart(key).slice(4, 24)), `api_keys.${column} holds part of the key`);
  }

  // No text column of any table holds the key (or its first 20 random characters).
  const columns = await h.db.$queryRaw<{ table_name: string; column_name: string }[]>`
    SELECT table_name, column_name FROM information_schema.columns
    WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'json', 'jsonb')`;
  t.true(columns.length > 5);
  const needle = `%${key.slice(4, 24)}%`;
  // Its own connection without the service's 5 s statement bound: the shared test database holds
  // every other file's events (megabyte payloads among them), and a full scan of them under a
  // loaded CI can take longer than any request may.
  const scan = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await scan.connect();
  try {
    for (const { table_name, column_name } of columns) {
      const hits = await scan.query<{ n: string }>(`SELECT count(*) AS n FROM (SELECT 1 FROM "${table_name}" WHERE "${column_name}"::text LIKE $1 LIMIT 1) s`, [
        needle,
      ]);
      t.is(Number(hits.rows[0].n), 0, `${table_name}.${column_name} holds the key`);
    }
  } finally {
    await scan.end();
  }
});

test('key list and key revoke never print a key, only its suffix', async (t) => {
  const slug = uniqueSlug();
  await orgCreate(h.operator, [slug]);
  const keys: string[] = [];
  for (let i = 0; i < 2; i++) {
    const created = await intake(h.env, ['key', 'create', slug]);
    t.is(created.code, 0, created.stderr);
    keys.push(JSON.parse(created.stdout).key);
  }
  const list = await intake(h.env, ['key', 'list', slug]);
  t.is(list.code, 0, list.stderr);
  const listed = JSON.parse(list.stdout) as Record<string, unknown>[];
  t.deepEqual(
    listed.map((k) => k.suffix),
    keys.map((k) => k.slice(-5)),
  );
  for (const entry of listed) t.deepEqual(Object.keys(entry).sort(), ['createdAt', 'environment', 'status', 'suffix']);

  const revoke = await intake(h.env, ['key', 'revoke', slug, keys[0].slice(-5)]);
  t.is(revoke.code, 0, revoke.stderr);
  t.deepEqual(JSON.parse(revoke.stdout), { suffix: keys[0].slice(-5), status: 'revoked' });
  const after = await intake(h.env, ['key', 'list', slug]);

  for (const run of [list, revoke, after]) {
    for (const key of keys) {
      t.false(run.stdout.includes(secretPart(key)), 'stdout shows a key');
      t.false(run.stderr.includes(secretPart(key)), 'stderr shows a key');
    }
  }
});
