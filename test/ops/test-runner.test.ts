// `npm test` (scripts/test.mts) and `npm run doctor` (scripts/doctor.mts) as a newcomer meets
// them: without promtool, npm test says so (and why, and how to install it) before running
// anything; ava's closing lines become one total; the doctor names the setting to change.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { satisfiesEngines } from '../../scripts/doctor.mts';
import { avaCounts, failureLines } from '../../scripts/test.mts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function node(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(process.execPath, ['--import', 'tsx', path.join(ROOT, script)], { cwd: ROOT, env, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

test('without promtool and prometheus on PATH, npm test says what is missing, why and how to get it, and runs nothing', async (t) => {
  // A PATH that holds node alone: no promtool, no prometheus (chromium is found at /usr/bin/chromium if installed).
  const bin = mkdtempSync(path.join(tmpdir(), 'intake-path-'));
  t.teardown(() => rmSync(bin, { recursive: true, force: true }));
  symlinkSync(process.execPath, path.join(bin, 'node'));
  const run = await node('scripts/test.mts', { ...process.env, PATH: bin });
  t.is(run.code, 1);
  t.regex(run.stderr, /npm test needs what is missing below; nothing was run/);
  t.regex(run.stderr, /fail\s+promtool not found \(the alert rules and their unit tests[^\n]*\n\s+→ apt-get install prometheus/);
  t.regex(run.stderr, /fail\s+prometheus not found/);
  t.notRegex(run.stdout + run.stderr, /── typecheck/, 'no group ran');
  t.regex(run.stdout, /^total: 0 passed, \d+ failed \(prerequisites\)$/m);
});

test("ava's closing lines add up to one total", (t) => {
  t.deepEqual(avaCounts('  ✔ a\n  ─\n\n  12 tests passed\n'), { passed: 12, failed: 0, skipped: 0 });
  t.deepEqual(avaCounts('  1 known failure\n  3 tests failed\n  2 tests skipped\n  1 test todo\n  40 tests passed\n  1 uncaught exception\n'), {
    passed: 40,
    failed: 4,
    skipped: 4,
  });
  t.deepEqual(avaCounts('  1 test passed\n  1 test failed\n'), { passed: 1, failed: 1, skipped: 0 });
  // With failures ava prints no passed count: the ✔ lines are counted.
  t.deepEqual(avaCounts('  ✔ a › one (2s)\n  ✘ [fail]: a › two\n  ✔ b › three\n    ℹ a log line ✔ \n  ─\n\n  1 test failed\n'), {
    passed: 2,
    failed: 1,
    skipped: 0,
  });
});

test('what failed is repeated at the end: ✘ lines, timeouts and uncaught exceptions, once each', (t) => {
  const output = [
    '  ✔ a › one',
    '  ✘ [fail]: a › two Expected 202',
    '  ✘ Timed out while running tests',
    '  Uncaught exception in test/b.test.ts',
    '  ✘ [fail]: a › two Expected 202',
    '    ℹ a log line',
  ].join('\n');
  t.deepEqual(failureLines(output), [
    '  ✘ [fail]: a › two Expected 202',
    '  ✘ Timed out while running tests',
    '  Uncaught exception in test/b.test.ts',
  ]);
  t.deepEqual(failureLines('  ✔ a › one\n  12 tests passed\n'), []);
});

test('the doctor names the setting to change: an unreachable DATABASE_URL, a Redis database out of range', async (t) => {
  const env = {
    ...process.env,
    INTAKE_ENV_FILE: '',
    DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/x',
    REDIS_URL: 'redis://127.0.0.1:6379/999',
    PORT: '0',
    DASHBOARD_PORT: '0',
  };
  const run = await node('scripts/doctor.mts', env);
  t.is(run.code, 1);
  t.regex(run.stdout, /fail\s+PostgreSQL at 127\.0\.0\.1:1 \(DATABASE_URL\): [^\n]+\n\s+→ start PostgreSQL, or set DATABASE_URL/);
  t.regex(run.stdout, /fail\s+Redis at 127\.0\.0\.1:6379 \(REDIS_URL\): ERR DB index is out of range\n\s+→ use a database number the server has in REDIS_URL/);
  t.regex(run.stdout, /^ok\s+Node\.js v/m);
  t.regex(run.stdout, /^doctor: \d+ problems?, \d+ warnings?$/m);
});

test('engines ranges: the tested lines only', (t) => {
  const range = '^20.19.0 || ^24.0.0';
  t.true(satisfiesEngines('v20.19.0', range));
  t.true(satisfiesEngines('v24.11.1', range));
  t.false(satisfiesEngines('v20.18.3', range));
  t.false(satisfiesEngines('v22.12.0', range));
  t.false(satisfiesEngines('v18.20.0', range));
});
