// Errors are told apart by their class and their code, never by their words: PostgreSQL's by
// SQLSTATE and the fields node-postgres reads from its answer, Redis's by the code its error
// reply begins with, ioredis's own by their class or the message constant it exports. Checked on
// errors the libraries made against real servers: this machine's PostgreSQL and Redis, a
// PostgreSQL of the test's own answering in German, and redis-servers of the test's own (full,
// a replica, a replica whose master is gone, a cluster node, one asking for a password).
import { execFile, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { Queue } from 'bullmq';
import { Redis, ReplyError, type RedisOptions } from 'ioredis';
import pg from 'pg';
import { settingHint } from '../../cli/setting-errors.ts';
import { createDb, isDataError, isNoPartitionFor, poolOf, sqlState } from '../../platform/db.ts';
import { createRedis } from '../../platform/redis.ts';
import { isOomError, redisErrorCode } from '../../platform/redis-memory.ts';
import { ReplicaAckError } from '../../platform/replica-ack.ts';
import { isMissingPartition } from '../../events/event-store.ts';
import { TimeoutError } from '../../platform/with-timeout.ts';
import { triesAnotherPartition } from '../../gateway/event-batcher.ts';
import { freePort } from '../helpers/free-port.ts';
import { startOwnRedis } from '../helpers/redis-server.ts';
import { TEST_DATABASE_URL, TEST_REDIS_URL, testEnv } from '../helpers/services.ts';

const run = promisify(execFile);

/** What a statement threw (the test fails if it did not throw). */
async function thrown(work: () => Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await work();
  } catch (err) {
    return err as Error & Record<string, unknown>;
  }
  throw new Error('expected the statement to be refused');
}

/**
 * PostgreSQL's three refusals of an insert into a partitioned table, all SQLSTATE 23514: a row
 * no partition holds, a CHECK of the partition it reached, and a row sent straight to a
 * partition outside its bounds. The table is a temporary one named `events`, which hides the real
 * one on this connection only, and the transaction is rolled back.
 */
async function partitionRefusals(query: (sql: string) => Promise<unknown>) {
  await query('BEGIN');
  try {
    await query('CREATE TEMP TABLE events (received_at timestamptz NOT NULL, n int) PARTITION BY RANGE (received_at)');
    await query(
      "CREATE TEMP TABLE events_day PARTITION OF events (CONSTRAINT n_small CHECK (n < 10)) FOR VALUES FROM ('2026-01-01T00:00Z') TO ('2026-01-02T00:00Z')",
    );
    const refused = async (sql: string) => {
      await query('SAVEPOINT s');
      const err = await thrown(() => query(sql));
      await query('ROLLBACK TO SAVEPOINT s');
      return err;
    };
    return {
      missing: await refused("INSERT INTO events VALUES ('1990-01-01T00:00Z', 1)"),
      check: await refused("INSERT INTO events VALUES ('2026-01-01T12:00Z', 11)"),
      outOfBounds: await refused("INSERT INTO events_day VALUES ('1990-01-01T00:00Z', 1)"),
    };
  } finally {
    await query('ROLLBACK');
  }
}

test("no partition for a row: PostgreSQL's own error, through the worker's node-postgres pool, is recognised by its fields; a CHECK and a partition's bound, the same SQLSTATE, are not", async (t) => {
  const db = createDb({ databaseUrl: TEST_DATABASE_URL, databasePoolSize: 1 });
  t.teardown(() => db.$disconnect());
  const client = await poolOf(db).connect();
  let errors: Awaited<ReturnType<typeof partitionRefusals>>;
  try {
    errors = await partitionRefusals((sql) => client.query(sql));
  } finally {
    client.release();
  }
  const { missing, check, outOfBounds } = errors;
  for (const err of [missing, check, outOfBounds]) t.is(sqlState(err), '23514');
  t.like(missing, { table: 'events', constraint: undefined });
  t.true(isMissingPartition(missing));
  t.true(isDataError(missing), 'still a refusal of the data for the batch rules: the worker makes the partition first');
  t.false(isNoPartitionFor(missing, 'event_ids'));
  t.like(check, { table: 'events_day', constraint: 'n_small' });
  t.false(isMissingPartition(check));
  t.like(outOfBounds, { table: 'events_day', constraint: undefined });
  t.false(isMissingPartition(outOfBounds));
  // The words play no part either way: lc_messages changes the message, never the fields.
  t.true(isMissingPartition(Object.assign(missing, { message: 'keine Partition von Relation »events« für die Zeile gefunden' })));
  t.false(isMissingPartition(Object.assign(check, { message: 'no partition of relation "events" found for row' })));
});

test('no partition for a row through Prisma: its adapter keeps the SQLSTATE but not the table, so it is never taken for one (events are inserted through the pool)', async (t) => {
  const db = createDb({ databaseUrl: TEST_DATABASE_URL, databasePoolSize: 1 });
  t.teardown(() => db.$disconnect());
  const err = await thrown(() =>
    db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe('CREATE TEMP TABLE events (received_at timestamptz NOT NULL) PARTITION BY RANGE (received_at)');
      await tx.$executeRawUnsafe("INSERT INTO events VALUES ('1990-01-01T00:00Z')");
    }),
  );
  t.is(sqlState(err), '23514');
  t.false(isMissingPartition(err));
});

// A PostgreSQL of the test's own (initdb, as pg-replica.ts starts them) whose server finds a
// German locale made here with localedef (LOCPATH: nothing is installed on the machine).
const PG_BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
const canSpeakGerman =
  existsSync(path.join(PG_BIN, 'initdb')) &&
  existsSync('/usr/share/i18n/locales/de_DE') &&
  spawnSync('localedef', ['--help'], { stdio: 'ignore' }).status === 0;

async function asPostgres(command: string, args: string[], env: Record<string, string>): Promise<void> {
  if (process.getuid?.() !== 0) {
    await run(command, args, { env: { ...process.env, ...env } });
    return;
  }
  // initdb refuses root.
  const quote = (a: string) => `'${a.replaceAll("'", `'\\''`)}'`;
  const assignments = Object.entries(env).map(([k, v]) => `${k}=${quote(v)}`);
  await run('su', ['postgres', '-s', '/bin/sh', '-c', ['env', ...assignments, ...[command, ...args].map(quote)].join(' ')]);
}

(canSpeakGerman ? test : test.skip)(
  'no partition for a row, from a PostgreSQL answering in German (lc_messages de_DE.UTF-8): recognised all the same',
  async (t) => {
    t.timeout(60_000);
    const dir = mkdtempSync(path.join(tmpdir(), 'intake-pg-de-'));
    const locales = path.join(dir, 'locales');
    mkdirSync(locales);
    // localedef exits 1 on warnings about the locale's sources, with the locale made all the same.
    await run('localedef', ['-i', 'de_DE', '-f', 'UTF-8', path.join(locales, 'de_DE.UTF-8')]).catch(() => {});
    if (process.getuid?.() === 0) {
      const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
      chownSync(dir, id('-u'), id('-g'));
    }
    const data = path.join(dir, 'data');
    const port = await freePort();
    const env = { LOCPATH: locales };
    t.teardown(async () => {
      await asPostgres(path.join(PG_BIN, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], env).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    });
    await asPostgres(path.join(PG_BIN, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync'], env);
    const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off`;
    await asPostgres(path.join(PG_BIN, 'pg_ctl'), ['-D', data, '-o', options, '-l', path.join(dir, 'log'), '-w', 'start'], env);
    const client = new pg.Client({ connectionString: `postgresql://postgres@127.0.0.1:${port}/postgres` });
    await client.connect();
    t.teardown(() => client.end());
    await client.query("SET lc_messages TO 'de_DE.UTF-8'");
    const { missing, check, outOfBounds } = await partitionRefusals((sql) => client.query(sql));
    t.is(missing.message, 'keine Partition von Relation »events« für die Zeile gefunden', 'the server answers in German');
    t.true(isMissingPartition(missing));
    t.false(isMissingPartition(check));
    t.false(isMissingPartition(outOfBounds));
  },
);

test("Redis's error code: the first word of its reply, a script's refusal included; null for what Redis did not say", async (t) => {
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  const key = `${testEnv().QUEUE_PREFIX}:error-classes`;
  t.teardown(async () => {
    await redis.del(key);
    redis.disconnect();
  });
  t.is(redisErrorCode(await thrown(() => redis.call('NO-SUCH-COMMAND'))), 'ERR');
  await redis.set(key, 'text');
  t.is(redisErrorCode(await thrown(() => redis.hget(key, 'field'))), 'WRONGTYPE');
  t.is(
    redisErrorCode(await thrown(() => redis.eval("return redis.call('HGET', KEYS[1], 'field')", 1, key))),
    'WRONGTYPE',
    'Redis 7 keeps the code of a script',
  );
  // Redis before 7.0 wraps a script's refused call in ERR, the refusal's code kept behind '-' (as
  // reported from Redis 6 servers, e.g. outline/outline#1538): ioredis's own class, that reply.
  const redis6 = new ReplyError(
    "ERR Error running script (call to f_0a9a51ee96320953ec7bde8e63f3f060b9dac00c): @user_script:41: @user_script: 41: -OOM command not allowed when used memory > 'maxmemory'.",
  );
  t.is(redisErrorCode(redis6), 'OOM');
  t.true(isOomError(redis6));
  const offline = createRedis({ redisUrl: `redis://127.0.0.1:${await freePort()}` }, 'producer');
  t.teardown(() => offline.disconnect());
  t.is(redisErrorCode(await thrown(() => offline.ping())), null, "ioredis's own refusal");
  t.is(redisErrorCode(new Error("OOM command not allowed when used memory > 'maxmemory'.")), null, 'the words without a reply from Redis');
});

test('OOM: a full Redis refusing a command, a script and BullMQ adding a job', async (t) => {
  const own = await startOwnRedis();
  t.teardown(() => own.close());
  const client = new Redis(own.url, { maxRetriesPerRequest: 1 });
  const queue = new Queue('error-classes', { connection: client });
  t.teardown(async () => {
    await queue.close();
    client.disconnect();
  });
  await queue.waitUntilReady();
  await own.setMaxmemory(1);
  const refusals = [
    await thrown(() => client.set('k', 'v')),
    await thrown(() => client.eval("return redis.call('SET', KEYS[1], 'v')", 1, 'k')),
    await thrown(() => queue.add('x', { n: 1 })),
  ];
  for (const err of refusals) {
    t.true(isOomError(err), err.message);
    t.false(triesAnotherPartition(err), 'every master gets the same traffic: no other partition for a full one');
  }
  await own.setMaxmemory(0);
  t.false(isOomError(await thrown(() => client.call('NO-SUCH-COMMAND'))));
});

test("a batch tries another partition on the master-away answers of real servers and ioredis's own refusals, and on nothing else", async (t) => {
  t.timeout(60_000);
  const closedPort = await freePort();
  const opened: { close(): unknown }[] = [];
  t.teardown(async () => {
    for (const o of opened.reverse()) await o.close();
  });
  const client = (url: string, options: RedisOptions = {}) => {
    const redis = new Redis(url, { maxRetriesPerRequest: 1, ...options });
    redis.on('error', () => {});
    opened.push({ close: () => redis.disconnect() });
    return redis;
  };
  const yes: [string, Error][] = [];
  const no: [string, Error][] = [];

  // ioredis: the producer profile with Redis away, a connection closed under a command, retries spent.
  const away = createRedis({ redisUrl: `redis://127.0.0.1:${closedPort}` }, 'producer');
  opened.push({ close: () => away.disconnect() });
  yes.push(['not connected, no offline queue', await thrown(() => away.set('k', 'v'))]);
  const own = await startOwnRedis();
  opened.push(own);
  const blocked = client(own.url, { retryStrategy: () => null });
  const id = await blocked.client('ID');
  const waiting = thrown(() => blocked.blpop('nothing', 0));
  await own.admin.client('KILL', 'ID', String(id));
  yes.push(['connection closed', await waiting]);
  yes.push(['retries spent', await thrown(() => client(`redis://127.0.0.1:${closedPort}`, { maxRetriesPerRequest: 0, retryStrategy: () => 50 }).ping())]);

  // Redis: a replica written to (as a command and from a script), a replica whose master is gone.
  const replica = await startOwnRedis(['--replicaof', '127.0.0.1', String(own.port)]);
  opened.push(replica);
  yes.push(['READONLY', await thrown(() => replica.admin.set('k', 'v'))]);
  yes.push(['READONLY in a script', await thrown(() => replica.admin.eval("return redis.call('SET', KEYS[1], 'v')", 1, 'k'))]);
  const orphan = await startOwnRedis();
  opened.push(orphan);
  await orphan.admin.config('SET', 'replica-serve-stale-data', 'no');
  await orphan.admin.replicaof('127.0.0.1', String(closedPort));
  yes.push(['MASTERDOWN', await thrown(() => orphan.admin.get('k'))]);

  // A cluster node: no slot served; then a cluster client whose slots stop being served.
  const node = await startOwnRedis(['--cluster-enabled', 'yes', '--cluster-announce-ip', '127.0.0.1']);
  opened.push(node);
  yes.push(['CLUSTERDOWN', await thrown(() => node.admin.set('k', 'v'))]);
  await node.admin.cluster('ADDSLOTSRANGE', 0, 16383);
  const state = async () => /cluster_state:(\w+)/.exec(String(await node.admin.cluster('INFO')))![1];
  for (let i = 0; i < 100 && (await state()) !== 'ok'; i++) await new Promise((r) => setTimeout(r, 50));
  const cluster = createRedis({ redisUrl: 'redis://127.0.0.1:6379', redisClusterNodes: [`127.0.0.1:${node.port}`], enqueueTimeoutMs: 400 }, 'producer');
  opened.push({ close: () => cluster.disconnect() });
  await new Promise((resolve) => cluster.once('ready', resolve));
  t.is(await cluster.set('k', 'v'), 'OK');
  await node.admin.cluster('DELSLOTSRANGE', 0, 100);
  for (let i = 0; i < 100 && (await state()) !== 'fail'; i++) await new Promise((r) => setTimeout(r, 50));
  yes.push(['redirections spent', await thrown(() => cluster.set('k', 'v'))]);
  await node.admin.cluster('DELSLOTSRANGE', 101, 16383);
  yes.push(['no node for the slot', await thrown(() => cluster.set('k', 'v'))]);

  // TRYAGAIN needs a slot caught mid-migration: ioredis's class with the reply Redis sends then.
  yes.push(['TRYAGAIN', new ReplyError('TRYAGAIN Multiple keys request during rehashing of slot')]);
  yes.push(['replicas did not confirm', new ReplicaAckError('0 of 1 replicas confirmed the write in time')]);

  no.push(['an unknown command', await thrown(() => own.admin.call('NO-SUCH-COMMAND'))]);
  no.push(['the enqueue bound', new TimeoutError('enqueue took longer than 2000 ms')]);
  no.push(['the words of CLUSTERDOWN, not from Redis', new Error('CLUSTERDOWN The cluster is down')]);

  for (const [what, err] of yes) t.true(triesAnotherPartition(err), `${what}: ${err.name}: ${err.message}`);
  for (const [what, err] of no) t.false(triesAnotherPartition(err), `${what}: ${err.name}: ${err.message}`);
  // ioredis's own refusals are plain Errors: each case met the one it was meant to.
  const met = new Map(yes);
  t.is(met.get('connection closed')!.constructor, Error);
  t.regex(met.get('not connected, no offline queue')!.message, /^Stream isn't writeable/);
  t.regex(met.get('redirections spent')!.message, /^Too many Cluster redirections\. Last error: ReplyError: CLUSTERDOWN/);
  t.regex(met.get('no node for the slot')!.message, /^Cluster isn't ready/);
  t.is(met.get('retries spent')!.name, 'MaxRetriesPerRequestError');
});

test('Redis refusing the credentials of REDIS_URL, as the CLI meets it: NOAUTH and WRONGPASS name the setting', async (t) => {
  const own = await startOwnRedis();
  t.teardown(() => own.close());
  await own.admin.config('SET', 'requirepass', 'secret');
  const config = { databaseUrl: TEST_DATABASE_URL, redisUrl: '' };
  for (const [url, code] of [
    [`redis://127.0.0.1:${own.port}`, 'NOAUTH'],
    [`redis://:wrong@127.0.0.1:${own.port}`, 'WRONGPASS'],
  ]) {
    const redis = createRedis({ redisUrl: url }, 'worker');
    redis.on('error', () => {});
    const err = await thrown(() => redis.ping());
    redis.disconnect();
    t.is(redisErrorCode(err), code);
    t.regex(
      settingHint(err, { ...config, redisUrl: url })!,
      new RegExp(`^Redis at 127\\.0\\.0\\.1:${own.port} refused the credentials of REDIS_URL: ${code} `),
    );
  }
});
