// Applies prisma/migrations offline with Prisma's WebAssembly schema engine: the native
// engine cannot be downloaded everywhere intake is built. The bookkeeping
// (`_prisma_migrations`) is the same as `prisma migrate deploy`, so either tool works.
import { existsSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils';
import { daysToCreate } from '../events/partition-plan.ts';
import { createEventPartitions, eventPartitions } from '../events/storage.ts';

/**
 * The folder holding prisma/: the parent of cli/ for the sources, of dist/ for the build
 * (and deeper for a build made elsewhere in the checkout), so it is looked for upwards.
 */
function projectRoot(from: string): string {
  for (let dir = from; path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'prisma', 'schema.prisma'))) return dir;
  }
  return path.dirname(from); // none: a migrate then names the file it did not find
}

const root = projectRoot(path.dirname(fileURLToPath(import.meta.url)));
export const migrationsDir = path.join(root, 'prisma', 'migrations');
export const schemaPath = path.join(root, 'prisma', 'schema.prisma');

type Engine = {
  applyMigrations(input: unknown): Promise<{ appliedMigrationNames: string[] }>;
  diff(input: unknown): Promise<{ stdout: string | null; exitCode: number }>;
  free(): void;
};

/** Node 20 imports `.wasm` only behind a flag, so instantiate the bytes ourselves. */
async function loadEngineModule() {
  const require = createRequire(import.meta.url);
  const glueFile = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg');
  const dir = path.dirname(glueFile);
  const glue = await import(pathToFileURL(glueFile).href);
  const bytes = await readFile(path.join(dir, 'schema_engine_bg.wasm'));
  // The engine arms a 10 s timer it never clears; unref'd, that timer no longer keeps a process
  // that has finished migrating (`intake migrate`, every test file) alive for 10 more seconds.
  const imports: WebAssembly.ModuleImports = { ...glue };
  for (const name of Object.keys(imports).filter((n) => n.startsWith('__wbg_setTimeout_'))) {
    const arm = glue[name] as (fn: () => void, ms: number) => NodeJS.Timeout;
    imports[name] = (fn: () => void, ms: number) => arm(fn, ms).unref();
  }
  const { instance } = await WebAssembly.instantiate(bytes, { './schema_engine_bg.js': imports });
  glue.__wbg_set_wasm(instance.exports);
  (instance.exports.__wbindgen_start as () => void)();
  return glue as { SchemaEngine: { new: (o: unknown, log: (s: string) => void, adapter: unknown) => Promise<Engine> } };
}

let engineModule: ReturnType<typeof loadEngineModule> | undefined;

/**
 * @prisma/adapter-pg runs a migration script by splitting it on every `;`, which breaks any
 * statement with a semicolon inside (a PL/pgSQL function body). Send the whole script as one
 * simple-protocol query instead: PostgreSQL parses it properly and runs it as one implicit
 * transaction, which is what `prisma migrate deploy` does with the native engine.
 */
function wholeScripts(factory: PrismaPg): PrismaPg {
  const connect = factory.connect.bind(factory);
  factory.connect = async () => {
    const adapter = await connect();
    const raw = adapter as unknown as { client: pg.Pool; onError(err: unknown): never };
    adapter.executeScript = async (script: string) => {
      try {
        await raw.client.query(script);
      } catch (err) {
        raw.onError(err);
      }
    };
    return adapter;
  };
  return factory;
}

async function withEngine<T>(databaseUrl: string, work: (engine: Engine) => Promise<T>): Promise<T> {
  engineModule ??= loadEngineModule();
  const { SchemaEngine } = await engineModule;
  const schema = await readFile(schemaPath, 'utf8');
  // Our own pool, closed when done: an idle connection left behind would keep holding
  // Prisma's migration advisory lock and stall the next migrate in another process.
  const pool = new pg.Pool({ connectionString: databaseUrl });
  pool.on('error', () => {});
  const adapter = bindMigrationAwareSqlAdapterFactory(wholeScripts(new PrismaPg(pool)));
  try {
    const engine = await SchemaEngine.new({ datamodels: [[schemaPath, schema]] }, () => {}, adapter);
    try {
      return await work(engine);
    } finally {
      engine.free();
    }
  } finally {
    await pool.end();
  }
}

export async function listMigrations() {
  const entries = (await readdir(migrationsDir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  const lockPath = path.join(migrationsDir, 'migration_lock.toml');
  return {
    baseDir: migrationsDir,
    lockfile: { path: 'migration_lock.toml', content: await readFile(lockPath, 'utf8').catch(() => null) },
    shadowDbInitScript: '',
    migrationDirectories: await Promise.all(
      entries.map(async (name) => ({
        path: name,
        migrationFile: {
          path: 'migration.sql',
          content: await readFile(path.join(migrationsDir, name, 'migration.sql'), 'utf8').then(
            (value) => ({ tag: 'ok', value }),
            (err: Error) => ({ tag: 'error', value: err.message }),
          ),
        },
      })),
    ),
  };
}

/** CREATE DATABASE when the target does not exist yet (connects to the `postgres` database). */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  if (!name) throw new Error('DATABASE_URL names no database');
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount) return false;
    try {
      await client.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`);
    } catch (err) {
      // Another process created it between our check and our CREATE: 42P04, or 23505 when both
      // CREATE DATABASE statements ran at once (the catalog's unique index refuses the second).
      const code = (err as { code?: string }).code;
      if (code !== '42P04' && code !== '23505') throw err;
      return false;
    }
    return true;
  } finally {
    await client.end();
  }
}

// Several processes (tests, compose replicas) may migrate at once; one advisory lock
// serializes them so none sees a half-applied history.
const MIGRATE_LOCK = 72_616_001;

/**
 * The partitions of events from yesterday to tomorrow, so that a database is ready for inserts
 * when migrate returns; the workers' storage maintenance makes the rest ahead of time.
 */
async function createFirstPartitions(databaseUrl: string) {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  pool.on('error', () => {});
  try {
    const existing = new Set((await eventPartitions(pool)).map((p) => p.day));
    await createEventPartitions(pool, daysToCreate(existing, Date.now(), 1));
  } finally {
    await pool.end();
  }
}

export async function migrate(databaseUrl: string): Promise<{ createdDatabase: boolean; applied: string[] }> {
  const createdDatabase = await ensureDatabase(databaseUrl);
  const lock = new pg.Client({ connectionString: databaseUrl });
  await lock.connect();
  try {
    await lock.query('SELECT pg_advisory_lock($1)', [MIGRATE_LOCK]);
    const migrationsList = await listMigrations();
    const out = await withEngine(databaseUrl, (engine) => engine.applyMigrations({ migrationsList, filters: { externalTables: [], externalEnums: [] } }));
    await createFirstPartitions(databaseUrl);
    return { createdDatabase, applied: out.appliedMigrationNames };
  } finally {
    await lock.end();
  }
}

/**
 * SQL that takes the schema `fromSchema` (the one the existing migrations produce) to the
 * current schema.prisma. Schema to schema: the engine's adapter cannot describe a live
 * database here (it cannot read PostgreSQL's internal "char" type), and needs none for this.
 */
export async function schemaDiffSql(databaseUrl: string, fromSchema: string | null): Promise<string> {
  const schema = await readFile(schemaPath, 'utf8');
  const out = await withEngine(databaseUrl, (engine) =>
    engine.diff({
      from: fromSchema === null ? { tag: 'empty' } : { tag: 'schemaDatamodel', files: [{ path: schemaPath, content: fromSchema }] },
      to: { tag: 'schemaDatamodel', files: [{ path: schemaPath, content: schema }] },
      script: true,
      shadowDatabaseUrl: null,
      exitCode: null,
      filters: { externalTables: [], externalEnums: [] },
    }),
  );
  return out.stdout ?? '';
}
