// The operator console and admin API under test: `intake operator …` run as a user runs it
// (stdin included), and a database of the test file's own, since whether any operator exists
// changes what the whole dashboard does.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CliRun } from '../security/cli.ts';
import { startDashboard } from '../../gateway/dashboard.ts';
import type { LoginLimits } from '../../gateway/console/login-limit.ts';
import { createDb } from '../../platform/db.ts';
import { createLogger } from '../../platform/logger.ts';
import { ownDatabase, testConfig, testEnv } from './services.ts';

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/intake.js');

/** `intake <args>` with `input` on its stdin. */
export function intakeWithInput(env: Record<string, string>, args: string[], input: string): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [bin, ...args], { env: { ...process.env, ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
    child.stdin!.end(input);
  });
}

/** `intake operator add <name> --role <role> --password-stdin`; throws unless it succeeded. */
export async function addOperatorByCli(env: Record<string, string>, name: string, role: 'admin' | 'read-only', password: string) {
  const run = await intakeWithInput(env, ['operator', 'add', name, '--role', role, '--password-stdin'], `${password}\n`);
  if (run.code !== 0) throw new Error(`operator add ${name}: exit ${run.code}: ${run.stderr}`);
  return JSON.parse(run.stdout) as { name: string; role: string; createdAt: number };
}

/** A dashboard in this process on `env`'s settings (DASHBOARD_PORT 0 unless given). */
export async function consoleInProcess(env: Record<string, string>, options: { loginLimits?: Partial<LoginLimits> } = {}) {
  const config = testConfig({ DASHBOARD_PORT: '0', ...env });
  const db = createDb(config);
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test-dashboard');
  const board = await startDashboard({ config, db, log, loginLimits: options.loginLimits });
  return {
    url: `http://127.0.0.1:${board.port}`,
    port: board.port,
    db,
    async close() {
      await board.close();
      await db.$disconnect();
    },
  };
}

export interface Login {
  /** The Cookie header to send. */
  cookie: string;
  csrfToken: string;
  /** The Set-Cookie header as answered. */
  setCookie: string;
}

/** POST /login as a script does (JSON); throws unless it succeeded. */
export async function logInAs(url: string, name: string, password: string): Promise<Login> {
  const res = await fetch(`${url}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ name, password }),
    redirect: 'manual',
  });
  if (res.status !== 200) throw new Error(`login of ${name}: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { csrfToken: string };
  const setCookie = res.headers.get('set-cookie') ?? '';
  return { cookie: setCookie.split(';')[0], csrfToken: body.csrfToken, setCookie };
}

/** One request to the dashboard (no redirect followed): status, headers, text and JSON. */
export async function call(url: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) {
  const { method = 'GET', headers = {}, body } = options;
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const res = await fetch(url + path, {
    method,
    headers: payload !== undefined && typeof body !== 'string' ? { 'content-type': 'application/json', ...headers } : headers,
    body: payload,
    redirect: 'manual',
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** A database of the test file's own with no operator in it (whether one exists changes what the dashboard does). */
export async function consoleDatabase(suffix: string): Promise<string> {
  const url = await ownDatabase(suffix);
  const db = createDb(testConfig(testEnv({ DATABASE_URL: url })));
  try {
    await db.operator.deleteMany();
    await db.consoleAudit.deleteMany();
    await db.privacyRequest.deleteMany();
  } finally {
    await db.$disconnect();
  }
  return url;
}
