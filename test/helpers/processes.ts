// Gateways, workers and dashboards: in-process (fast) or as child processes of `bin/intake.js`
// (for races between processes, SIGKILL and SIGTERM).
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDb } from '../../platform/db.ts';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { createLogger, type Logger } from '../../platform/logger.ts';
import { startGateway } from '../../gateway/server.ts';
import { startWorkers, type Workers } from '../../workers/main.ts';
import type { TestFn } from 'ava';
import { closeEmptied, newTenant, openHarness, type Harness, type Tenant } from './services.ts';

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/intake.js');

/**
 * `ownPool`: the gateway gets connections of its own, as a separate process would, so a test
 * polling the database hard through the harness cannot make its requests wait for one.
 */
export async function gatewayInProcess(h: Harness, options: { ownPool?: boolean; log?: Logger } = {}) {
  const db = options.ownPool ? createDb(h.config) : h.db;
  // TEST_LOG_LEVEL=error (say) shows what in-process gateways and workers log while debugging a test.
  const log = options.log ?? createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test-gateway');
  const gateway = await startGateway({ config: h.config, db, log });
  return {
    url: `http://127.0.0.1:${gateway.port}`,
    async close() {
      await gateway.close();
      if (db !== h.db) await db.$disconnect();
    },
  };
}

export type InProcessGateway = Awaited<ReturnType<typeof gatewayInProcess>>;

/**
 * A test file's harness and in-process gateway: opened before its tests (`opened` receives
 * them, and may prepare more before any test runs), closed after them, the gateway first.
 */
export function harnessWithGateway(test: TestFn, opened: (h: Harness, gateway: InProcessGateway) => unknown, options: { ownPool?: boolean } = {}): void {
  let h: Harness | undefined;
  let gateway: InProcessGateway | undefined;
  test.before(async () => {
    h = await openHarness();
    gateway = await gatewayInProcess(h, options);
    await opened(h, gateway);
  });
  test.after.always(async () => {
    await gateway?.close();
    await h?.close();
  });
}

/** harnessWithGateway with a tenant of the file's own, made before any test runs (`opened` receives it too). */
export function harnessWithGatewayAndTenant(test: TestFn, opened: (h: Harness, gateway: InProcessGateway, tenant: Tenant) => unknown): void {
  harnessWithGateway(test, async (h, gateway) => opened(h, gateway, await newTenant(h)));
}

/**
 * A test file's harness with an in-process gateway and worker (the harness opened with `env`):
 * opened before its tests (`opened` receives them), closed after them, the worker first, then
 * the gateway; `emptied`: the events queue is emptied too (closeEmptied).
 */
export function harnessWithGatewayAndWorker(
  test: TestFn,
  opened: (h: Harness, gateway: InProcessGateway, worker: Workers) => unknown,
  options: { env?: Record<string, string>; ownPool?: boolean; emptied?: boolean } = {},
): void {
  let h: Harness | undefined;
  let gateway: InProcessGateway | undefined;
  let worker: Workers | undefined;
  test.before(async () => {
    h = await openHarness(options.env);
    gateway = await gatewayInProcess(h, { ownPool: options.ownPool });
    worker = await workerInProcess(h);
    await opened(h, gateway, worker);
  });
  test.after.always(async () => {
    await worker?.close();
    await gateway?.close();
    if (options.emptied) await closeEmptied(h);
    else await h?.close();
  });
}

/** `log`: a logger of the test's own, to read what the worker logs. */
export async function workerInProcess(h: Harness, log: Logger = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test-worker')) {
  return startWorkers({ config: h.config, db: h.db, log });
}

/** A debug-level logger whose records the test reads (parsed, in order). */
export function capturedLogger(): { log: Logger; records: Record<string, unknown>[] } {
  const records: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line) records.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level: 'debug' }, stream), records };
}

export interface Child {
  process: ChildProcess;
  url: string;
  output(): string;
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<number | string | null>;
  kill(signal?: NodeJS.Signals): Promise<number | string | null>;
}

/** Start `intake <command>` with the harness's environment; resolves once it says it is up. */
export function spawnIntake(command: 'gateway' | 'worker' | 'dashboard', env: Record<string, string>, timeoutMs = 30_000): Promise<Child> {
  const child = spawn(process.execPath, [bin, command], {
    env: { ...process.env, ...env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  const ready = command === 'gateway' ? /"msg":"gateway listening"/ : command === 'dashboard' ? /"msg":"dashboard listening"/ : /"msg":"worker started"/;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`intake ${command} did not start:\n${out}`));
    }, timeoutMs);
    let started = false;
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      // Once up, the output is only kept: matching it again on every chunk would cost the test
      // process time that grows with everything logged (a line per request under load).
      if (started || !ready.test(out)) return;
      started = true;
      clearTimeout(timer);
      const port = /"port":(\d+)/.exec(out)?.[1];
      resolve({
        process: child,
        url: port ? `http://127.0.0.1:${port}` : '',
        output: () => out,
        exited,
        kill: (signal = 'SIGTERM') => {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          return exited;
        },
      });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`intake ${command} exited early:\n${out}`));
    });
  });
}

/**
 * A test file's harness and the `intake` processes its tests start: the harness opened before
 * its tests (`opened` receives it and the list to add each process to), every process SIGKILLed
 * after them, then the harness closed; `emptied`: the events queue is emptied too (closeEmptied).
 */
export function harnessWithProcesses(test: TestFn, opened: (h: Harness, children: Child[]) => unknown, options: { emptied?: boolean } = {}): void {
  let h: Harness | undefined;
  const children: Child[] = [];
  test.before(async () => {
    h = await openHarness();
    await opened(h, children);
  });
  test.after.always(async () => {
    await Promise.all(children.map((c) => c.kill('SIGKILL')));
    if (options.emptied) await closeEmptied(h);
    else await h?.close();
  });
}

/** Two gateway processes started at once, each added to `children` (a failed start fails after both settled). */
export async function spawnTwoGateways(env: Record<string, string>, children: Child[]): Promise<[Child, Child]> {
  const started = await Promise.allSettled([spawnIntake('gateway', env), spawnIntake('gateway', env)]);
  for (const s of started) if (s.status === 'fulfilled') children.push(s.value);
  for (const s of started) if (s.status === 'rejected') throw s.reason;
  return [children[children.length - 2], children[children.length - 1]];
}
