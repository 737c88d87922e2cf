// One configuration per checkout, as a second shell sees it: `intake` run in a folder with a
// .env reads its settings (the environment still wins), `intake config` shows what it runs with,
// and an error caused by a setting from the file says where it came from.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/intake.js');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `intake …` in `cwd`, with the test process's environment less every intake setting. */
function intake(cwd: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  const base = { ...process.env };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'PORT', 'INTAKE_URL', 'INTAKE_API_KEY', 'INTAKE_ENV_FILE', 'LOG_LEVEL', 'DASHBOARD_PASSWORD'])
    delete base[name];
  return new Promise((resolve) =>
    execFile(process.execPath, [bin, ...args], { cwd, env: { ...base, ...env }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

function checkout(t: { teardown(fn: () => void): void }, dotenv: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'intake-checkout-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, '.env'), dotenv);
  return dir;
}

test('intake config: the settings of .env, under the environment, with INTAKE_URL from PORT and secrets masked', async (t) => {
  const dir = checkout(t, 'PORT=3107\nDATABASE_URL=postgresql://app:s3cret@127.0.0.1:5432/intake_other\nDASHBOARD_PASSWORD=hunter2\nLOG_LEVEL=debug\n');
  const all = await intake(dir, ['config'], { LOG_LEVEL: 'warn' });
  t.is(all.code, 0, all.stderr);
  const settings = JSON.parse(all.stdout);
  t.is(settings.PORT, '3107');
  t.is(settings.INTAKE_URL, 'http://127.0.0.1:3107', 'the gateway URL follows PORT');
  t.is(settings.DATABASE_URL, 'postgresql://app:***@127.0.0.1:5432/intake_other');
  t.is(settings.DASHBOARD_PASSWORD, '***');
  t.is(settings.LOG_LEVEL, 'warn', 'the environment wins over the file');
  t.is(settings.REDIS_URL, 'redis://127.0.0.1:6379', 'unset: the default');
  const one = await intake(dir, ['config', '--get', 'INTAKE_URL']);
  t.is(one.stdout, 'http://127.0.0.1:3107\n');
  t.is((await intake(dir, ['config', '--get', 'INTAKE_URL'], { INTAKE_URL: 'https://intake.example/' })).stdout, 'https://intake.example\n');
  const unknown = await intake(dir, ['config', '--get', 'NOPE']);
  t.is(unknown.code, 2);
  t.regex(unknown.stderr, /^intake: unknown setting "NOPE"/);
});

test('a database missing at the DATABASE_URL of .env: the error names the setting, the file and what creates it', async (t) => {
  const dir = checkout(t, 'DATABASE_URL=postgresql://postgres@127.0.0.1:5432/intake_no_such_db_29\n');
  const run = await intake(dir, ['key', 'list', 'acme']);
  t.is(run.code, 1);
  t.is(
    run.stderr,
    'intake: database "intake_no_such_db_29" does not exist on 127.0.0.1:5432 (DATABASE_URL, set in .env): run `npx intake migrate` (or `npm start`, which migrates) to create it, or point DATABASE_URL at the right one\n',
  );
});

test('a bad value in .env is reported like one in the environment; INTAKE_ENV_FILE naming a missing file is an error', async (t) => {
  const dir = checkout(t, 'PORT=not-a-port\n');
  const bad = await intake(dir, ['config']);
  t.is(bad.code, 1);
  t.regex(bad.stderr, /^intake: invalid configuration: PORT="not-a-port": must be an integer/);
  const missing = await intake(dir, ['config'], { INTAKE_ENV_FILE: 'nowhere.env' });
  t.is(missing.code, 1);
  t.regex(missing.stderr, /^intake: INTAKE_ENV_FILE="nowhere.env": no such file/);
  t.is((await intake(dir, ['config'], { INTAKE_ENV_FILE: '' })).code, 0, 'INTAKE_ENV_FILE= reads no file');
});
