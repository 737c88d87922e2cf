// npm run migration:new -- <name>: writes prisma/migrations/<stamp>_<name>/migration.sql
// with the SQL that takes the existing migrations to prisma/schema.prisma (offline engine).
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { migrationsDir, pendingSchemaSql } from '../common/migrate.ts';

const name = (process.argv[2] ?? '').replace(/[^a-z0-9_]/gi, '_');
if (!name) {
  console.error('usage: npm run migration:new -- <name>');
  process.exit(2);
}
const sql = await pendingSchemaSql(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake');
if (!sql.trim() || /^-- This is an empty migration/.test(sql.trim())) {
  console.error('schema.prisma and the migrations agree: nothing to write');
  process.exit(0);
}
const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
const dir = path.join(migrationsDir, `${stamp}_${name}`);
await mkdir(dir, { recursive: true });
await writeFile(path.join(dir, 'migration.sql'), sql);
console.log(path.relative(process.cwd(), path.join(dir, 'migration.sql')));
