// The `intake` command as a user runs it: one JSON document on stdout however large (a pipe
// takes it asynchronously), one line on stderr on error.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness } from '../helpers/services.ts';

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
  t.regex(usage.stderr, /^intake: expected <org-slug> <journey-id> \(intake help lists the commands\)\n$/);
  const none = await run(process.execPath, [bin], { env }).catch((e) => e);
  t.is(none.code, 2);
  t.is(none.stderr, 'intake: expected a command (intake help lists the commands)\n');
  const help = await run(process.execPath, [bin, 'help'], { env });
  t.regex(help.stdout, /^usage: intake /m);
  const missing = await run(process.execPath, [bin, 'key', 'list', 'no-such-org-here'], { env }).catch((e) => e);
  t.is(missing.code, 1);
  t.is(missing.stderr, 'intake: organization no-such-org-here does not exist\n');
  // The unexpected too: the cause, not Prisma's source excerpt and a stack.
  const unreachable = await run(process.execPath, [bin, 'org', 'create', 'nowhere'], {
    env: { ...env, DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/x' },
  }).catch((e) => e);
  t.is(unreachable.code, 1);
  t.regex(unreachable.stderr, /^intake: \w+: Can't reach database server at 127\.0\.0\.1:1\n$/);
});
