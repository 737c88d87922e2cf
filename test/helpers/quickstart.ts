// The README's quick start as a newcomer runs it: a checkout of its own (links to this one's
// files, and room for its own .env and .intake/), `npm start` in one shell, and every line of the
// README's walk-through block in another, each checked against the output printed under it
// there. For the quick-start tests (test/docs/quickstart*.test.ts).
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import type { ExecutionContext } from 'ava';
import { describeConfig } from '../../platform/config.ts';
import { freePort } from './free-port.ts';
import { TEST_REDIS_URL } from './services.ts';

const run = promisify(execFile);
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MARKER = '<!-- quickstart:';
/** The organization the walk-through names: each run replaces it with one of its own. */
export const README_ORG = /\bacme\b/g;
/** What a checkout of the project holds besides its own .env and data (and what git ignores or never runs). */
const NOT_LINKED = new Set(['.env', '.intake', '.git', '.scratch', 'test-results']);

export interface Step {
  command: string;
  expected: string[];
}

/** The walk-through: the console block after the marker, `$ command` lines and the output under each. */
export function walkThrough(readme: string): Step[] {
  const at = readme.indexOf(MARKER);
  if (at < 0) throw new Error(`README.md has no ${MARKER} marker`);
  const block = /```console\n([\s\S]*?)\n```/.exec(readme.slice(at));
  if (!block) throw new Error('no ```console block after the quick-start marker');
  const steps: Step[] = [];
  for (const line of block[1].split('\n')) {
    if (line.startsWith('$ ')) steps.push({ command: line.slice(2), expected: [] });
    else if (steps.length) steps[steps.length - 1].expected.push(line);
    else throw new Error(`output before any command: ${line}`);
  }
  return steps;
}

export const quoted = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;

/** An expected line as a pattern: `…` stands for anything. */
export const pattern = (line: string) =>
  new RegExp(
    `^${line
      .split('…')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*?')}$`,
  );

export function matches(expected: string[], stdout: string): boolean {
  const text = stdout.replace(/\n$/, '');
  const lines = text === '' ? [] : text.split('\n');
  return lines.length === expected.length && expected.every((e, i) => pattern(e).test(lines[i]));
}

/** `npm start` in `cwd`, resolving `port` with the gateway's port once it listens. */
export function npmStart(cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 120_000) {
  const child = spawn('npm', ['start'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const streams = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (streams.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (streams.stderr += chunk.toString()));
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  const port = new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start did not listen within ${timeoutMs / 1000} s:\n${out}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const listening = /"port":(\d+)[^\n]*"msg":"gateway listening"/.exec(out);
      if (!listening) return;
      clearTimeout(timer);
      resolve(Number(listening[1]));
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`npm start exited:\n${out}`));
    });
  });
  return {
    port,
    exited,
    output: () => out,
    stdout: () => streams.stdout,
    stderr: () => streams.stderr,
    stop: () => (child.exitCode === null && child.signalCode === null && child.kill('SIGTERM'), exited),
  };
}

/** A checkout of its own: links to this one's files, and room for its own .env and .intake/. */
export function checkout(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'intake-checkout-'));
  for (const name of readdirSync(ROOT)) if (!NOT_LINKED.has(name)) symlinkSync(path.join(ROOT, name), path.join(dir, name));
  return dir;
}

/** A shell's environment with no intake setting in it: they come from the checkout's .env only. */
export function shellEnvironment(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const { env: name } of describeConfig()) delete env[name];
  for (const name of ['TEST_DATABASE_URL', 'TEST_REDIS_URL', 'INTAKE_DEFAULT_DATABASE_URL', 'INTAKE_DEFAULT_REDIS_URL']) delete env[name];
  // Nor what npm tells the scripts it runs (npm test, npx -p node@24 …): a newcomer's shell has none of it.
  for (const name of Object.keys(env)) if (/^npm_/i.test(name)) delete env[name];
  return env;
}

/**
 * Runs every line of the README's walk-through in `dir`, one shell per command (what one exports
 * is there for the next), with `org` for the README's organization; each must print what the
 * README shows under it (`events get` is run again while the event is pending, as the README
 * says). Logs each command's duration. False after failing `t` at the first that does not.
 */
export async function walkReadme(t: ExecutionContext, dir: string, shell: NodeJS.ProcessEnv, org: string): Promise<boolean> {
  const state = path.join(dir, '.shell-state');
  writeFileSync(state, '');
  const local = (text: string) => text.replace(README_ORG, org);
  for (const step of walkThrough(readFileSync(path.join(ROOT, 'README.md'), 'utf8'))) {
    const command = local(step.command);
    const expected = step.expected.map(local);
    const script = `set -a\n. ${quoted(state)}\n${command}\nstatus=$?\nexport -p > ${quoted(state)}\nexit $status\n`;
    const deadline = Date.now() + 60_000;
    for (let attempt = 1; ; attempt++) {
      const started = performance.now();
      const result = await run('bash', ['-c', script], { cwd: dir, env: shell, maxBuffer: 16 << 20 }).then(
        (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
      // The first run's: a repeated `events get` measures the worker, not the command.
      if (attempt === 1) t.log(`${((performance.now() - started) / 1000).toFixed(2)} s  $ ${step.command.slice(0, 70)}`);
      if (result.code === 0 && matches(expected, result.stdout)) break;
      const pending = result.code === 0 && result.stdout.includes('"status":"pending"');
      if (!pending || Date.now() > deadline) {
        t.fail(`$ ${command}\nexit ${result.code}\nprinted:\n${result.stdout}\nexpected:\n${expected.join('\n')}\nstderr:\n${result.stderr}`);
        return false;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    t.pass(step.command.slice(0, 60));
  }
  return true;
}

/**
 * Writes the checkout's .env as the quick-start tests give it: free ports for the gateway, the
 * dashboard and the worker's metrics, the test Redis, a queue prefix of the test's own, and
 * `databaseUrl`. Resolves with the ports.
 */
export async function writeCheckoutEnv(
  dir: string,
  databaseUrl: string,
  queuePrefix: string,
): Promise<{ port: number; dashboardPort: number; metricsPort: number }> {
  const [port, dashboardPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
  const settings = [
    `PORT=${port}`,
    `DASHBOARD_PORT=${dashboardPort}`,
    `WORKER_METRICS_PORT=${metricsPort}`,
    `DATABASE_URL=${databaseUrl}`,
    `REDIS_URL=${TEST_REDIS_URL}`,
    `QUEUE_PREFIX=${queuePrefix}`,
    'HOST=127.0.0.1',
    'LOG_LEVEL=info',
  ];
  writeFileSync(path.join(dir, '.env'), `${settings.join('\n')}\n`);
  return { port, dashboardPort, metricsPort };
}
