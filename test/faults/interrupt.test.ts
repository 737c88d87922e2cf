// Ctrl-C in the terminal that runs `npm start`: the terminal sends SIGINT to its whole
// foreground process group, npm among it, and npm sends its child a SIGINT of its own, so the
// service gets two, and a user who sees it still draining may press Ctrl-C again. Each case runs
// in a process group of its own (as a terminal's job) and is sent SIGINT as a group, then more
// while it drains: once more after it says it is shutting down while it holds requests it had
// accepted, or a stream of them. Whatever arrives after the first must not cut the drain short:
// the held requests are answered, every part says it stopped, and the exit status is 0.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import { eventually } from '../helpers/eventually.ts';
import { freePort } from '../helpers/free-port.ts';
import { halfSentTracks, request } from '../helpers/http.ts';
import { newTenant, openHarness, type Harness } from '../helpers/services.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => h.close());

interface Job {
  child: ChildProcess;
  output(): string;
  /** The exit code, or the signal that ended it. */
  exited: Promise<number | string | null>;
}

/** `command` as a terminal runs a job: the leader of a process group of its own. */
function startJob(command: string, args: string[], env: Record<string, string>): Job {
  const shell = { ...process.env };
  // What npm tells the scripts it runs (when the suite runs under `npm test`) is not a terminal's.
  for (const name of Object.keys(shell)) if (/^npm_/i.test(name)) delete shell[name];
  const child = spawn(command, args, { cwd: ROOT, env: { ...shell, ...env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  return { child, output: () => out, exited };
}

/**
 * The body's bound and the shutdown's are not under test: a machine loaded by the rest of the
 * suite must not reach them (the drain's bound, once spent, ends the process with 1).
 */
const UNBOUNDED = { BODY_TIMEOUT_MS: '60000', SHUTDOWN_TIMEOUT_MS: '60000' };

/** Ctrl-C: SIGINT to every process of the job's group. */
const interrupt = (job: Job) => process.kill(-job.child.pid!, 'SIGINT');

/** Whatever is left of the job's group, ended. */
function killGroup(job: Job): void {
  try {
    process.kill(-job.child.pid!, 'SIGKILL');
  } catch {
    // The group is gone already.
  }
}

const seen = (job: Job, line: RegExp, timeoutMs = 60_000) => eventually(async () => line.test(job.output()), { timeoutMs, intervalMs: 50 });

/** Interrupts a job that holds `held` half-sent Track requests, twice: the requests must still be answered 202. */
async function interruptWhileHolding(t: ExecutionContext, job: Job, url: string, held: ReturnType<typeof halfSentTracks>) {
  const reading = async () =>
    new RegExp(`^intake_http_uploads_in_progress ${held.length}$`, 'm').test((await request(url, '/metrics', { method: 'GET' })).text);
  t.true(await eventually(reading, { timeoutMs: 20_000, intervalMs: 50 }), 'every held request reached the gateway');
  interrupt(job);
  t.true(await seen(job, /"msg":"shutting down"/, 20_000), `it began to shut down:\n${job.output()}`);
  // The user presses Ctrl-C again while it drains.
  interrupt(job);
  // Let the signals land before the held requests are let go: a process they kill dies here.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  for (const s of held) s.finish();
  const replies = await Promise.all(held.map((s) => s.reply));
  t.deepEqual(
    replies.map((r) => r.status),
    Array(held.length).fill(202),
    `every request it held was answered:\n${job.output().slice(-3000)}`,
  );
}

test('npm start: Ctrl-C (SIGINT to the group, forwarded again by npm) and a second Ctrl-C still drain everything, then exit 0', async (t) => {
  t.timeout(180_000);
  const tenant = await newTenant(h);
  const job = startJob('npm', ['start'], { ...h.env, ...UNBOUNDED, DASHBOARD_PORT: String(await freePort()) });
  t.teardown(() => killGroup(job));
  t.true(await seen(job, /"msg":"gateway listening"/, 120_000), job.output());
  t.true(await seen(job, /"msg":"dashboard listening"/), job.output());
  const port = Number(/"port":(\d+)[^\n]*"msg":"gateway listening"/.exec(job.output())![1]);
  const url = `http://127.0.0.1:${port}`;
  await interruptWhileHolding(t, job, url, halfSentTracks(url, tenant.slug, tenant.key, 5));
  t.is(await job.exited, 0, job.output().slice(-3000));
  for (const part of ['gateway', 'worker', 'dashboard']) t.regex(job.output(), new RegExp(`"msg":"${part} stopped"`), part);
  t.regex(job.output(), /"msg":"already shutting down"/);
});

test('intake gateway (its gateway on a thread): a repeated SIGINT does not cut the drain short', async (t) => {
  t.timeout(120_000);
  const tenant = await newTenant(h);
  const job = startJob(process.execPath, ['bin/intake.js', 'gateway'], { ...h.env, ...UNBOUNDED });
  t.teardown(() => killGroup(job));
  t.true(await seen(job, /"msg":"gateway listening"/), job.output());
  const url = `http://127.0.0.1:${/"port":(\d+)/.exec(job.output())![1]}`;
  await interruptWhileHolding(t, job, url, halfSentTracks(url, tenant.slug, tenant.key, 5));
  t.is(await job.exited, 0, job.output().slice(-3000));
  t.regex(job.output(), /"msg":"gateway stopped"/);
});

for (const [command, ready] of [
  ['worker', /"msg":"worker started"/],
  ['dashboard', /"msg":"dashboard listening"/],
] as const) {
  test(`intake ${command}: Ctrl-C pressed again and again while it stops, and it still stops gracefully with 0`, async (t) => {
    t.timeout(120_000);
    const job = startJob(process.execPath, ['bin/intake.js', command], { ...h.env, DASHBOARD_PORT: String(await freePort()) });
    t.teardown(() => killGroup(job));
    t.true(await seen(job, ready), job.output());
    // A signal that comes before the process took the previous one merges with it: a stream of
    // them, 5 ms apart, lands during the drain however short it is.
    const repeat = setInterval(() => {
      try {
        interrupt(job);
      } catch {
        // The group is gone: it has exited.
      }
    }, 5);
    t.teardown(() => clearInterval(repeat));
    interrupt(job);
    t.is(await job.exited, 0, job.output().slice(-3000));
    t.regex(job.output(), new RegExp(`"msg":"${command} stopped"`));
  });
}
