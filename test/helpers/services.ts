// The real PostgreSQL and Redis of this machine. Each test file gets its own queue prefix
// (so workers of one file never take another's jobs) and each test its own tenant.
import { randomBytes } from 'node:crypto';
import { loadConfig, type Config } from '../../platform/config.ts';
import { createDb, type Db } from '../../platform/db.ts';
import { migrate } from '../../cli/migrate.ts';
import { keyCreate } from '../../cli/commands/key.ts';
import { envCreate } from '../../cli/commands/env.ts';
import { orgCreate } from '../../cli/commands/org.ts';
import { loadQueueModules, openOperator, type OperatorDeps } from '../../operations/operator.ts';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_test';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The start of every test's Redis key prefix: a run of its own (TEST_KEY_PREFIX=mine-1) can find every key it made. */
const KEY_PREFIX = process.env.TEST_KEY_PREFIX || 'test';

/** Environment variables for a process under test (in-process config or a child's env). */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: TEST_DATABASE_URL,
    REDIS_URL: TEST_REDIS_URL,
    QUEUE_PREFIX: `${KEY_PREFIX}-${randomBytes(6).toString('hex')}`,
    LOG_LEVEL: 'silent',
    PORT: '0',
    WORKER_METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_POOL_SIZE: '4',
    // One process per gateway keeps the suite light; test/gateway/cluster.test.ts runs several.
    GATEWAY_PROCESSES: '1',
    // A .env of the checkout (a developer's own settings) must not reach the processes under test.
    INTAKE_ENV_FILE: '',
    ...overrides,
  };
}

export function testConfig(env: Record<string, string> = testEnv()): Config {
  return loadConfig({ ...process.env, ...env });
}

/**
 * A migrated database of the test file's own, for what is global per database rather than per
 * queue prefix (the outbox, journey timers): no other file's worker may touch its rows.
 */
export async function ownDatabase(suffix: string): Promise<string> {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `${url.pathname}_${suffix}`;
  await migrate(url.toString());
  return url.toString();
}

let migrated: Promise<unknown> | undefined;
/** Migrate the test database once per test process (an advisory lock serializes processes). */
export function migrateOnce(): Promise<unknown> {
  return (migrated ??= migrate(TEST_DATABASE_URL));
}

export interface Harness {
  config: Config;
  env: Record<string, string>;
  db: Db;
  operator: OperatorDeps;
  close(): Promise<void>;
}

export async function openHarness(overrides: Record<string, string> = {}): Promise<Harness> {
  await migrateOnce();
  const env = testEnv(overrides);
  const config = testConfig(env);
  const db = createDb(config);
  const operator = openOperator(config, db, await loadQueueModules());
  return { config, env, db, operator, close: () => operator.close() };
}

/** Close a harness whose queue nothing will run again, emptying it first: its waiting and failed jobs would stay in Redis. */
export async function closeEmptied(h: Harness | undefined): Promise<void> {
  await h?.operator
    .eventsQueue()
    .obliterate({ force: true })
    .catch(() => {});
  await h?.close();
}

export interface Tenant {
  slug: string;
  key: string;
  suffix: string;
  environmentId: string;
}

export function uniqueSlug(prefix = 't'): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

/** A fresh organization with Production and one active key. */
export async function newTenant(h: Harness, features?: string): Promise<Tenant> {
  const slug = uniqueSlug();
  await orgCreate(h.operator, features ? [slug, '--features', features] : [slug]);
  const created = await keyCreate(h.operator, [slug]);
  const env = await h.db.environment.findUniqueOrThrow({ where: { pathValue: slug } });
  return { slug, key: created.key, suffix: created.suffix, environmentId: env.id };
}

/** A non-production environment of a tenant's organization, with its own key. */
export async function newEnvironment(h: Harness, tenant: Tenant, envKey = `test-${randomBytes(3).toString('hex')}`) {
  const pathValue = `${tenant.slug}_${envKey.replaceAll('-', '_')}`;
  await envCreate(h.operator, [tenant.slug, pathValue, '--key', envKey]);
  const created = await keyCreate(h.operator, [tenant.slug, '--env', pathValue]);
  const env = await h.db.environment.findUniqueOrThrow({ where: { pathValue } });
  return { pathValue, envKey, key: created.key, suffix: created.suffix, environmentId: env.id };
}
