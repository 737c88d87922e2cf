// `intake import` as a user runs it, against a real gateway: 10,000 NDJSON lines (some not JSON,
// some without userId, some the service refuses), killed with SIGKILL half-way and run again:
// it resumes, the summary's counts add up, every line was sent with one messageId only, and
// every profile holds the traits of its line.
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual, promisify } from 'node:util';
import test from 'ava';
import { createClient } from '../../clients/typescript/src/index.ts';
import { lineMessageId } from '../../cli/import/lines.ts';
import { messageKeyOf } from '../../identify/identify-write.ts';
import { importCommand, TRACK_REPLAY_WARNING } from '../../cli/commands/import.ts';
import { UsageError } from '../../cli/args.ts';
import { ImportStopped, runImport } from '../../cli/import/run.ts';
import net from 'node:net';
import { eventually } from '../helpers/eventually.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { newEnvironment, newTenant, openHarness, type Harness } from '../helpers/services.ts';

const run = promisify(execFile);
const bin = path.resolve('bin/intake.js');
let h: Harness;
let gateway: Awaited<ReturnType<typeof gatewayInProcess>>;
let dir: string;
test.before(async () => {
  h = await openHarness();
  gateway = await gatewayInProcess(h, { ownPool: true });
  dir = mkdtempSync(path.join(tmpdir(), 'intake-import-'));
});
test.after.always(async () => {
  await gateway?.close();
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const env = () => ({ ...process.env, ...h.env });

interface Expected {
  text: string;
  /** The line's bytes when they are not `text` in UTF-8. */
  bytes?: Buffer;
  /** The traits a profile must end with, or why the line is not applied. */
  outcome: { userId: string; traits: Record<string, unknown> } | { invalid: string } | { refused: true } | { blank: true };
}

/** 10,000 lines: valid calls, lines that are not UTF-8, not JSON or lack userId, calls the service refuses (400), a blank line. */
function customers(count: number): Expected[] {
  return Array.from({ length: count }, (_, i): Expected => {
    if (i % 997 === 13) return { text: `{"userId":"broken-${i}","traits":{`, outcome: { invalid: 'not JSON' } };
    if (i % 2503 === 11) {
      const bytes = Buffer.from(`{"userId":"bytes-${i}-\xff"}`, 'latin1');
      return { text: bytes.toString('latin1'), bytes, outcome: { invalid: 'not UTF-8' } };
    }
    if (i % 1499 === 7) return { text: JSON.stringify({ traits: { plan: 'pro' } }), outcome: { invalid: 'no userId' } };
    if (i % 2003 === 5) return { text: JSON.stringify({ userId: `refused-${i}`, traits: null }), outcome: { refused: true } };
    if (i === 4321) return { text: '', outcome: { blank: true } };
    const traits = { n: i, email: `c${i}@example.com`, plan: i % 3 ? 'pro' : 'free', tags: [i % 7] };
    return { text: JSON.stringify({ userId: `c-${i}`, traits }), outcome: { userId: `c-${i}`, traits } };
  });
}

test('10,000 lines, killed half-way and restarted: resumes, counts add up, each line applied once with one messageId', async (t) => {
  const tenant = await newTenant(h);
  const lines = customers(10_000);
  const file = path.join(dir, 'customers.ndjson');
  writeFileSync(file, Buffer.concat(lines.map((l) => Buffer.concat([l.bytes ?? Buffer.from(l.text), Buffer.from('\n')]))));
  const args = [bin, 'import', tenant.slug, '--file', file, '--url', gateway.url];
  const childEnv = { ...env(), INTAKE_API_KEY: tenant.key };

  // First run: SIGKILL once about half the lines are done.
  const first = spawn(process.execPath, args, { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let firstErr = '';
  first.stderr.on('data', (c: Buffer) => (firstErr += c));
  const exited = new Promise((resolve) => first.once('exit', (code, signal) => resolve(signal ?? code)));
  const checkpointFile = `${file}.checkpoint.json`;
  const halfway = await eventually(async () => existsSync(checkpointFile) && JSON.parse(readFileSync(checkpointFile, 'utf8')).doneBelow > 5000, {
    timeoutMs: 90_000,
    intervalMs: 50,
  });
  first.kill('SIGKILL');
  t.is(await exited, 'SIGKILL');
  t.true(halfway, `the first run got half-way: ${firstErr}`);
  const killedAt = JSON.parse(readFileSync(checkpointFile, 'utf8'));
  t.false(killedAt.completed);
  t.log(`killed with ${killedAt.doneBelow - 1 + killedAt.doneAbove.length} lines checkpointed`);

  // Second run: resumes and finishes.
  const second = await run(process.execPath, args, { env: childEnv, maxBuffer: 10e6 });
  const summary = JSON.parse(second.stdout);
  t.log(JSON.stringify({ ...summary, invalidLines: summary.invalidLines.length }));

  const valid = lines.flatMap((l, i) => ('userId' in l.outcome ? [{ line: i + 1, text: l.text, ...l.outcome }] : []));
  const invalid = lines.flatMap((l, i) => ('invalid' in l.outcome ? [{ line: i + 1, reason: l.outcome.invalid }] : []));
  const refused = lines.flatMap((l, i) => ('refused' in l.outcome ? [i + 1] : []));
  t.true(summary.resumed);
  t.is(summary.lines, 10_000);
  t.is(summary.applied + summary.duplicate + summary.failed + summary.invalid + summary.blank, summary.lines, 'the counts add up');
  t.is(summary.applied + summary.duplicate, valid.length);
  t.is(summary.invalid, invalid.length);
  t.deepEqual(summary.invalidLines, invalid, 'each invalid line by its number, never sent');
  t.is(summary.blank, 1);
  t.deepEqual(summary.failures, { '400 Invalid Identify call': refused.length }, 'failed by status and error; no 409');
  t.true(summary.sent < valid.length, `the second run sent only what was left (${summary.sent})`);
  t.is(summary.failedFile, `${file}.failed.ndjson`);

  // The failed-lines file: each failed or invalid line once, with its reason.
  const failedEntries = readFileSync(summary.failedFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  t.deepEqual(
    failedEntries.map((e) => e.line).sort((a, b) => a - b),
    [...invalid.map((i) => i.line), ...refused].sort((a, b) => a - b),
  );
  const notUtf8 = invalid.find((i) => i.reason === 'not UTF-8')!;
  t.like(
    failedEntries.find((e) => e.line === notUtf8.line),
    { error: 'not UTF-8', base64: lines[notUtf8.line - 1].bytes!.toString('base64') },
  );
  const refusedEntry = failedEntries.find((e) => e.line === refused[0]);
  t.like(refusedEntry, { status: 400, error: 'Invalid Identify call', text: lines[refused[0] - 1].text });
  t.deepEqual(
    refusedEntry.issues.map((i: { path: string[] }) => i.path.join('.')),
    ['traits'],
  );

  // Every valid line was sent with the one messageId derived from the file, line and text:
  // the service remembers exactly those, so no line was applied under two messageIds.
  const hash = createHash('sha256').update(readFileSync(file)).digest('hex');
  const remembered = await h.db.identifyMessage.findMany({ where: { environmentId: tenant.environmentId }, select: { messageKey: true } });
  t.is(remembered.length, valid.length);
  t.deepEqual(remembered.map((r) => r.messageKey).sort(), valid.map((v) => messageKeyOf(lineMessageId(hash, v.line, v.text))).sort());

  // Every profile holds the traits of its line (read through the Profiles API).
  const client = createClient({ baseUrl: gateway.url, orgSlug: tenant.slug, apiKey: tenant.key, maxSockets: 50 });
  t.teardown(() => client.close());
  const started = Date.now();
  const wrong: string[] = [];
  for (let i = 0; i < valid.length; i += 50) {
    await Promise.all(
      valid.slice(i, i + 50).map(async (v) => {
        const profile = await client.getProfile(v.userId);
        if (!isDeepStrictEqual(profile?.fields, v.traits)) wrong.push(v.userId);
      }),
    );
  }
  t.deepEqual(wrong, []);
  t.log(`${valid.length} profiles read back in ${Date.now() - started} ms`);
  for (const r of refused) t.is(await client.getProfile(`refused-${r - 1}`), null);

  // Progress on a pipe: plain periodic lines on stderr.
  t.regex(second.stderr, /^import: \[[#-]+\] [\d,]+\/10,000 \d+% [\d,]+\/s ETA \S+$/m);

  // Run again once complete: nothing is sent, the summary is the same.
  const again = JSON.parse((await run(process.execPath, args, { env: childEnv })).stdout);
  t.like(again, { sent: 0, applied: summary.applied, duplicate: summary.duplicate, failed: summary.failed, invalid: summary.invalid });
  t.is(await h.db.identifyMessage.count({ where: { environmentId: tenant.environmentId } }), valid.length);
});

test('a non-production environment: --env selects the path value, its key comes from the database', async (t) => {
  const tenant = await newTenant(h);
  const staging = await newEnvironment(h, tenant);
  const file = path.join(dir, 'staging.ndjson');
  writeFileSync(file, ['{"userId":"s-1","traits":{"a":1}}', '{"userId":"s-2","traits":{"a":2},"timestamp":"2026-01-01T00:00:00Z"}'].join('\n'));
  const { stdout } = await run(
    process.execPath,
    [bin, 'import', tenant.slug, '--env', staging.pathValue, '--file', file, '--url', gateway.url, '--key', staging.key, '--concurrency', '2'],
    {
      env: env(),
    },
  );
  t.like(JSON.parse(stdout), { lines: 2, applied: 2, failed: 0, invalid: 0, resumed: false, failedFile: null });
  const client = createClient({ baseUrl: gateway.url, orgSlug: staging.pathValue, apiKey: staging.key, environment: staging.envKey });
  t.teardown(() => client.close());
  t.deepEqual((await client.getProfile('s-2'))?.fields, { a: 2 });
  t.is((await client.getProfile('s-2'))?.updated_at, Date.parse('2026-01-01T00:00:00Z'), "a line's own timestamp is sent");
});

test('Track replay is refused with the contract warning; usage errors exit 2, a missing file 1', async (t) => {
  const fail = (args: string[]) =>
    run(process.execPath, [bin, 'import', ...args], { env: { ...env(), INTAKE_API_KEY: '' } }).then(
      () => t.fail('expected a failure'),
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
  const [track, missing] = await Promise.all([
    fail(['acme', '--file', 'x.ndjson', '--track', '--key', 'k']),
    fail(['acme', '--file', path.join(dir, 'nope.ndjson'), '--key', 'k']),
  ]);
  t.is(track!.code, 2);
  t.is(track!.stdout, '');
  t.true(track!.stderr.includes(`"${TRACK_REPLAY_WARNING}"`), track!.stderr);
  t.is(track!.stderr.trim().split('\n').length, 1);
  t.is(missing!.code, 1);
  t.regex(missing!.stderr, /^intake: cannot read .*nope\.ndjson: no such file\n$/);

  // The other usage mistakes, in-process (UsageError is what exits 2).
  const config = h.config;
  const usage = (args: string[], environment: NodeJS.ProcessEnv = {}) =>
    t.throwsAsync(importCommand({ ...config, intakeApiKey: environment.INTAKE_API_KEY ?? '' }, args), { instanceOf: UsageError });
  t.regex((await usage(['acme', '--file', 'x.ndjson'])).message, /API key is required: --key <key> or INTAKE_API_KEY/);
  await usage(['acme', '--key', 'k']);
  await usage(['acme', '--file', 'x.ndjson', '--key', 'k', '--concurrency', '0']);
  await usage(['acme', '--file', 'x.ndjson', '--key', 'k', '--concurrency', 'ten']);
  await usage(['--file', 'x.ndjson'], { INTAKE_API_KEY: 'k' });
  await usage(['acme', '--file', 'x.ndjson', '--key', 'k', '--env-key', 'staging']);
});

test('the service unreachable beyond the retries: the import stops, keeps its checkpoint, and resumes later', async (t) => {
  const tenant = await newTenant(h);
  const file = path.join(dir, 'later.ndjson');
  writeFileSync(file, Array.from({ length: 30 }, (_, i) => JSON.stringify({ userId: `l-${i}`, traits: { i } })).join('\n') + '\n');
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  const quiet = { write: () => true };
  const down = createClient({ baseUrl: `http://127.0.0.1:${port}`, orgSlug: tenant.slug, apiKey: tenant.key, retry: { maxAttempts: 2, baseDelayMs: 10 } });
  t.teardown(() => down.close());
  const stopped = await t.throwsAsync(runImport({ file, client: down, concurrency: 5, progress: quiet }), { instanceOf: ImportStopped });
  t.regex(stopped.message, /ECONNREFUSED.*: 0 of 30 lines done, checkpoint .*later\.ndjson\.checkpoint\.json; run the same command again to resume/);

  const up = createClient({ baseUrl: gateway.url, orgSlug: tenant.slug, apiKey: tenant.key });
  t.teardown(() => up.close());
  const summary = await runImport({ file, client: up, concurrency: 5, progress: quiet });
  t.like(summary, { resumed: true, lines: 30, applied: 30, duplicate: 0, failed: 0, sent: 30 });
});

test('a wrong key stops the import at once (401 is about every line), leaving every line to send again', async (t) => {
  const tenant = await newTenant(h);
  const file = path.join(dir, 'wrong-key.ndjson');
  writeFileSync(file, Array.from({ length: 50 }, (_, i) => JSON.stringify({ userId: `w-${i}`, traits: { i } })).join('\n'));
  const wrong = createClient({ baseUrl: gateway.url, orgSlug: tenant.slug, apiKey: 'itk_not-a-key' });
  t.teardown(() => wrong.close());
  const stopped = await t.throwsAsync(runImport({ file, client: wrong, concurrency: 10, progress: { write: () => true } }), { instanceOf: ImportStopped });
  t.regex(stopped.message, /^import stopped \(401 Invalid API key\): 0 of 50 lines done/);
  t.false(existsSync(`${file}.failed.ndjson`), 'no line is reported failed');
});
