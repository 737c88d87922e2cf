// The `intake` command as a user runs it: one JSON document on stdout however large (a pipe
// takes it asynchronously), one line on stderr on error, exit 2 for every usage mistake, usage
// for a group and for each command (every command's help is checked in test/unit/args.test.ts).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { newEnvironment, newTenant, openHarness, type Harness } from '../helpers/services.ts';
import { intake, type CliRun } from '../security/cli.ts';
import { ENVIRONMENT_REMOVED } from '../../operations/keys.ts';
import { GROUPS, groupHelp, commandHelp, overview } from '../../cli/usage.ts';

const run = promisify(execFile);
const bin = path.resolve('bin/intake.js');
let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => h?.close());

test('a large document reaches a pipe whole', async (t) => {
  const [gateway, worker] = [await gatewayInProcess(h), await workerInProcess(h)];
  try {
    const tenant = await newTenant(h);
    const body = trackBody({ properties: { blob: 'x'.repeat(300_000) } });
    t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body })).status, 202);
    t.true(await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === 1));
    const { stdout } = await run(process.execPath, [bin, 'events', 'get', tenant.slug, body.messageId as string], {
      env: { ...process.env, ...h.env },
      maxBuffer: 10e6,
    });
    t.true(stdout.length > 300_000);
    t.is(JSON.parse(stdout).event.properties.blob.length, 300_000);
  } finally {
    await gateway.close();
    await worker.close();
  }
});

test('an event nested deeper than JSON.stringify recurses prints whole', async (t) => {
  const [gateway, worker] = [await gatewayInProcess(h), await workerInProcess(h)];
  try {
    const tenant = await newTenant(h);
    const deep = '['.repeat(20_000) + '1' + ']'.repeat(20_000);
    const messageId = `deep-${Date.now()}`;
    const body = `{"type":"track","messageId":"${messageId}","event":"Deep","userId":"u1","timestamp":"2024-05-01T10:00:00Z","properties":{"d":${deep}}}`;
    t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body })).status, 202);
    t.true(await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === 1));
    const { stdout } = await run(process.execPath, [bin, 'events', 'get', tenant.slug, messageId], { env: { ...process.env, ...h.env }, maxBuffer: 10e6 });
    t.true(stdout.includes(`"properties":{"d":${deep}}`));
  } finally {
    await gateway.close();
    await worker.close();
  }
});

test('errors are one line on stderr: usage (exit 2) and operator errors (exit 1)', async (t) => {
  const env = { ...process.env, ...h.env };
  const usage = await run(process.execPath, [bin, 'journey', 'publish', 'only-one-arg'], { env }).catch((e) => e);
  t.is(usage.code, 2);
  t.is(usage.stdout, '');
  t.is(usage.stderr, 'intake: missing <journey-id> (usage: intake journey publish <org-slug> <journey-id> [--env <path-value>])\n');
  const none = await run(process.execPath, [bin], { env }).catch((e) => e);
  t.is(none.code, 2);
  t.is(none.stderr, 'intake: expected a command (intake help lists the commands)\n');
  const help = await run(process.execPath, [bin, 'help'], { env });
  t.regex(help.stdout, /^usage: intake /m);
  const missing = await run(process.execPath, [bin, 'key', 'list', 'no-such-org-here'], { env }).catch((e) => e);
  t.is(missing.code, 1);
  t.is(missing.stderr, 'intake: organization no-such-org-here does not exist\n');
  // The unexpected too: the cause and the setting behind it, not Prisma's source excerpt and a stack.
  const unreachable = await run(process.execPath, [bin, 'org', 'create', 'nowhere'], {
    env: { ...env, DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/x' },
  }).catch((e) => e);
  t.is(unreachable.code, 1);
  t.is(unreachable.stderr, 'intake: cannot reach PostgreSQL at 127.0.0.1:1 (DATABASE_URL): is it running, and is DATABASE_URL its address?\n');
});

/**
 * Runs of the real command, two at a time (each starts a Node process). The tests that make many
 * are serial (ava runs them before the others), so they do not starve the in-process gateways.
 */
async function intakeAll(env: Record<string, string>, runs: string[][]): Promise<CliRun[]> {
  const results: CliRun[] = [];
  for (let i = 0; i < runs.length; i += 2) results.push(...(await Promise.all(runs.slice(i, i + 2).map((args) => intake(env, args)))));
  return results;
}

test.serial('a group without its command prints its usage on stderr and exits 2; asked-for help goes to stdout with 0', async (t) => {
  // Neither needs the configuration or the database: help works with settings that would not start.
  const env = { ...h.env, DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/x', PORT: 'not-a-port' };
  const bare = await intakeAll(
    env,
    GROUPS.map((g) => [g]),
  );
  for (const [i, group] of GROUPS.entries()) {
    t.is(bare[i].code, 2, group);
    t.is(bare[i].stdout, '', group);
    t.is(bare[i].stderr, groupHelp(group) + '\n', group);
  }
  const asked: [string[], string][] = [
    [['help'], overview()],
    [['org', '--help'], groupHelp('org')],
    [['key', 'list', '--help'], commandHelp('key list')],
    [['help', 'events', 'names'], commandHelp('events names')],
    [['journey', 'create', 'acme', '-h'], commandHelp('journey create')],
    [['import', '--help'], commandHelp('import')],
    // A process's --help does not start it.
    [['gateway', '--help'], commandHelp('gateway')],
  ];
  const runs = await intakeAll(
    env,
    asked.map(([args]) => args),
  );
  for (const [i, [args, text]] of asked.entries()) {
    t.is(runs[i].code, 0, args.join(' '));
    t.is(runs[i].stdout, text + '\n', args.join(' '));
    t.is(runs[i].stderr, '', args.join(' '));
  }
});

test.serial('usage mistakes exit 2 with one line naming the mistake and the usage, before any database is touched', async (t) => {
  const env = { ...h.env, DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/x' };
  const mistakes: [string[], string][] = [
    [['journey', 'create', 'acme'], '--file <journey.json> is required'],
    [['env', 'create', 'acme', 'staging'], '--key <environment-key> is required'],
    [['events', 'names', 'acme', '--days', '-1'], '--days must be a whole number of days from 1 to 3650, not "-1"'],
    [['events', 'names', 'acme', '--days', '1.5'], '--days must be a whole number of days from 1 to 3650, not "1.5"'],
    [['events', 'activity', 'acme', '--limit', 'abc'], '--limit must be a whole number of events from 1 to 10000, not "abc"'],
    [['events', 'activity', 'acme', '--limit', '0'], '--limit must be a whole number of events from 1 to 10000, not "0"'],
    [['import', 'acme', '--key', 'k'], '--file <customers.ndjson> is required'],
    [['org', 'delete', 'acme'], 'unknown command "org delete": org takes create, features'],
    [['worker', '--concurrency', '2'], 'unknown option --concurrency: worker takes none'],
  ];
  const runs = await intakeAll(
    env,
    mistakes.map(([args]) => args),
  );
  for (const [i, [args, message]] of mistakes.entries()) {
    const label = args.join(' ');
    t.is(runs[i].code, 2, `${label}: ${runs[i].stderr}`);
    t.is(runs[i].stdout, '', label);
    t.is(runs[i].stderr.split('\n').length, 2, `one line: ${label}`);
    t.true(runs[i].stderr.startsWith(`intake: ${message} (`), `${label}: ${runs[i].stderr}`);
  }
  t.is(runs[0].stderr, 'intake: --file <journey.json> is required (usage: intake journey create <org-slug> --file <journey.json> [--env <path-value>])\n');
});

test.serial('key list shows the keys of a removed environment as environment-removed: they answer 403', async (t) => {
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const tenant = await newTenant(h);
  const staging = await newEnvironment(h, tenant);
  const revoked = await intake(h.env, ['key', 'create', tenant.slug, '--env', staging.pathValue]);
  const revokedSuffix = JSON.parse(revoked.stdout).suffix as string;
  t.is((await intake(h.env, ['key', 'revoke', tenant.slug, revokedSuffix, '--env', staging.pathValue])).code, 0);
  const track = () =>
    request(gateway.url, `/api/track/${staging.pathValue}`, {
      headers: { 'x-api-key': staging.key, 'x-service-environment': staging.envKey },
      body: trackBody(),
    });
  t.is((await track()).status, 202);

  t.is((await intake(h.env, ['env', 'remove', tenant.slug, staging.pathValue])).code, 0);
  const [list, production] = await intakeAll(h.env, [
    ['key', 'list', tenant.slug, '--env', staging.pathValue],
    ['key', 'list', tenant.slug],
  ]);
  t.is(list.code, 0, list.stderr);
  const statuses = Object.fromEntries((JSON.parse(list.stdout) as { suffix: string; status: string }[]).map((k) => [k.suffix, k.status]));
  t.deepEqual(statuses, { [staging.suffix]: ENVIRONMENT_REMOVED, [revokedSuffix]: 'revoked' });
  t.is((await track()).status, 403, 'what the listed status says');
  // Production's keys are unaffected.
  t.deepEqual(
    (JSON.parse(production.stdout) as { status: string }[]).map((k) => k.status),
    ['active'],
  );
});
