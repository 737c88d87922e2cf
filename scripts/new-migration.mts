// npm run migration:new -- <name> [--from <schema file>]
// Writes prisma/migrations/<stamp>_<name>/migration.sql with the SQL that takes the schema of
// the last commit (or --from) to the working prisma/schema.prisma, using the offline engine.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { migrationsDir, schemaDiffSql } from '../cli/migrate.ts';

const args = process.argv.slice(2);
const fromIndex = args.indexOf('--from');
const from = fromIndex >= 0 ? args.splice(fromIndex, 2)[1] : undefined;
const name = (args[0] ?? '').replace(/[^a-z0-9_]/gi, '_');
if (!name) {
  console.error('usage: npm run migration:new -- <name> [--from <schema file>]');
  process.exit(2);
}
const previous = from ? await readFile(from, 'utf8') : committedSchema();
const sql = await schemaDiffSql(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres', previous);
if (!sql.trim() || /^-- This is an empty migration/.test(sql.trim())) {
  console.error('prisma/schema.prisma has not changed: nothing to write');
  process.exit(0);
}
const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
const dir = path.join(migrationsDir, `${stamp}_${name}`);
await mkdir(dir, { recursive: true });
await writeFile(path.join(dir, 'migration.sql'), sql);
console.log(path.relative(process.cwd(), path.join(dir, 'migration.sql')));

function committedSchema(): string | null {
  try {
    return execFileSync('git', ['show', 'HEAD:prisma/schema.prisma'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return null;
  }
}
