// The checkout's .env as `intake` reads it: Node's --env-file syntax, the environment wins, a
// missing default file is no file, and INTAKE_ENV_FILE picks another (or none).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { EnvFileError, loadEnvFile } from '../../platform/env-file.ts';

function folder(t: { teardown(fn: () => void): void }, files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'intake-env-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}

test('.env fills in what the environment leaves unset; the environment wins', (t) => {
  const dir = folder(t, { '.env': '# a comment\nPORT=3100\nDATABASE_URL="postgresql://postgres@127.0.0.1:5433/intake_dev"\nLOG_LEVEL=debug # trailing\n' });
  const env: NodeJS.ProcessEnv = { LOG_LEVEL: 'warn' };
  const result = loadEnvFile(env, dir);
  t.is(result.file, path.join(dir, '.env'));
  t.deepEqual(result.names.sort(), ['DATABASE_URL', 'PORT']);
  t.is(env.PORT, '3100');
  t.is(env.DATABASE_URL, 'postgresql://postgres@127.0.0.1:5433/intake_dev');
  t.is(env.LOG_LEVEL, 'warn', 'the environment wins over the file');
});

test('no .env: nothing read, nothing changed', (t) => {
  const env: NodeJS.ProcessEnv = {};
  t.deepEqual(loadEnvFile(env, folder(t, {})), { file: null, names: [] });
  t.deepEqual(env, {});
});

test('INTAKE_ENV_FILE names another file, or none; a named file that is missing is an error naming the setting', (t) => {
  const dir = folder(t, { '.env': 'PORT=1\n', 'other.env': 'PORT=2\nINTAKE_ENV_FILE=.env\n' });
  const other: NodeJS.ProcessEnv = { INTAKE_ENV_FILE: 'other.env' };
  t.deepEqual(loadEnvFile(other, dir).names, ['PORT']);
  t.is(other.PORT, '2');
  t.is(other.INTAKE_ENV_FILE, 'other.env', 'the file cannot name another file');
  const none: NodeJS.ProcessEnv = { INTAKE_ENV_FILE: '' };
  t.deepEqual(loadEnvFile(none, dir), { file: null, names: [] });
  t.is(none.PORT, undefined);
  const error = t.throws(() => loadEnvFile({ INTAKE_ENV_FILE: 'missing.env' }, dir), { instanceOf: EnvFileError });
  t.regex(error.message, /^INTAKE_ENV_FILE="missing.env": no such file/);
});
