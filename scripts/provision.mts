// What `npm test` does about a missing prerequisite (the list is testPrerequisites' in
// scripts/doctor.mts) before it runs anything: it starts the machine's PostgreSQL and Redis when
// they are down at a loopback address, and installs the Debian packages the tests use (and those
// `npm run chaos` uses), when it may: as root or through passwordless sudo, with apt-get there.
// One line says each thing it does; what it may not do is left to the caller to report, with the
// command to run. CI runs nothing else first (.ci/run), so a fresh machine of CI's kind passes
// with `npm ci && npm test`. `npm run doctor -- --tests` uses the same plan to say what npm test
// would do here.
import { execFile, spawnSync, type ExecFileOptions } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import path from 'node:path';
import type { Finding, Prerequisite } from './doctor.mts';

/** The Debian packages npm test installs, each with what it is for (the line that says it installs it). */
export const PACKAGES = {
  prometheus: 'promtool and the Prometheus server the observability tests start',
  chromium: "the dashboard's browser test",
  faketime: "npm run chaos's fake clock",
  locales: "npm run chaos's German locale",
} as const;
export type AptPackage = keyof typeof PACKAGES;

/** The faketime package's library, which `npm run chaos` preloads for its fake clock (chaos/clock.ts). */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

/** How a missing prerequisite is got: a local server started, or a Debian package installed. */
export type Remedy = { start: 'postgresql' | 'redis'; url: string } | { apt: AptPackage };

/** What this process may do here. */
export interface Ability {
  /** How a privileged command runs: as root, through `sudo -n`, or not at all. */
  privilege: 'root' | 'sudo' | null;
  /** apt-get on PATH (Debian, Ubuntu). */
  apt: boolean;
  /** pg_lsclusters and pg_ctlcluster on PATH (Debian's postgresql-common): how a cluster is started. */
  pgCtlcluster: boolean;
  /** redis-server on PATH. */
  redisServer: boolean;
}

/** A prerequisite found missing, and how it would be got. */
export interface Gap {
  name: string;
  remedy: Remedy;
}

export type Step =
  | { kind: 'start'; service: 'postgresql' | 'redis'; host: string; port: number; for: string[] }
  | { kind: 'install'; pkg: AptPackage; for: string[] }
  /** Left to the user: `why` npm test does not do it here. */
  | { kind: 'cannot'; why: string; for: string[] };

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);
export const NO_PRIVILEGE = 'npm test installs packages and starts servers only as root or with passwordless sudo (sudo -n), and may not here';
export const NO_APT = 'no apt-get on PATH: npm test installs Debian packages only';

/**
 * What to do about `gaps`, given `ability`: pure, so that every case is tested without touching
 * the machine. A server is started only at a loopback address (anything else is not this
 * machine's to start) and a package is installed once however many gaps it fills; starts come
 * first, since the installs take the longest.
 */
export function plan(gaps: Gap[], ability: Ability): Step[] {
  const starts: Step[] = [];
  const installs = new Map<AptPackage, string[]>();
  const cannot = new Map<string, string[]>();
  const refuse = (why: string, name: string) => cannot.set(why, [...(cannot.get(why) ?? []), name]);
  for (const { name, remedy } of gaps) {
    if ('apt' in remedy) {
      if (!ability.apt) refuse(NO_APT, name);
      else if (!ability.privilege) refuse(NO_PRIVILEGE, name);
      else installs.set(remedy.apt, [...(installs.get(remedy.apt) ?? []), name]);
      continue;
    }
    const { host, port } = address(remedy.url, remedy.start === 'postgresql' ? 5432 : 6379);
    const what = remedy.start === 'postgresql' ? 'PostgreSQL' : 'Redis';
    if (!LOOPBACK.has(host)) refuse(`${what} at ${host} is not on this machine: npm test starts only a local one`, name);
    else if (remedy.start === 'postgresql' && !ability.pgCtlcluster)
      refuse("no pg_ctlcluster on PATH (Debian's postgresql package): npm test cannot start PostgreSQL", name);
    else if (remedy.start === 'redis' && !ability.redisServer)
      refuse('no redis-server on PATH (apt-get install redis-server): npm test cannot start Redis', name);
    else if (!ability.privilege) refuse(NO_PRIVILEGE, name);
    else starts.push({ kind: 'start', service: remedy.start, host, port, for: [name] });
  }
  return [
    ...starts,
    ...[...installs].map(([pkg, names]): Step => ({ kind: 'install', pkg, for: names })),
    ...[...cannot].map(([why, names]): Step => ({ kind: 'cannot', why, for: names })),
  ];
}

function address(url: string, defaultPort: number): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname || 'localhost', port: Number(parsed.port || defaultPort) };
}

/** What a step does, in the one line said before it (`npm run doctor -- --tests` says it as what npm test would do). */
export function describe(step: Step): string {
  if (step.kind === 'start') return `starting ${step.service === 'postgresql' ? 'PostgreSQL' : 'Redis'} on ${step.host}:${step.port} (not running)`;
  if (step.kind === 'install') return `installing Debian's ${step.pkg} package (${PACKAGES[step.pkg]})`;
  return `${step.for.join(', ')}: ${step.why}`;
}

/** A program on a PATH (the one of `env`, as a spawn with it would find it). */
export function onPath(name: string, env: NodeJS.ProcessEnv = process.env): boolean {
  return (env.PATH ?? '').split(path.delimiter).some((dir) => {
    if (!dir) return false;
    try {
      accessSync(path.join(dir, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** What this process may do here; sudo is asked (`sudo -n true`, never a password prompt) only when not root. */
export function detectAbility(env: NodeJS.ProcessEnv = process.env): Ability {
  const root = process.getuid?.() === 0;
  const sudo = !root && onPath('sudo', env) && spawnSync('sudo', ['-n', 'true'], { env, stdio: 'ignore', timeout: 10_000 }).status === 0;
  return {
    privilege: root ? 'root' : sudo ? 'sudo' : null,
    apt: onPath('apt-get', env),
    pgCtlcluster: onPath('pg_lsclusters', env) && onPath('pg_ctlcluster', env),
    redisServer: onPath('redis-server', env),
  };
}

/** A cluster of `pg_lsclusters --no-header`'s output: version, name, port, status. */
export interface Cluster {
  version: string;
  name: string;
  port: number;
  online: boolean;
}

export function parseClusters(output: string): Cluster[] {
  return output
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((cols) => cols.length >= 4 && /^\d+$/.test(cols[2]))
    .map(([version, name, port, status]) => ({ version, name, port: Number(port), online: status.startsWith('online') }));
}

interface Run {
  code: number;
  output: string;
}

/** Runs a command, its output kept (shown only when it fails: apt-get prints hundreds of lines). */
function run(command: string, args: string[], options: ExecFileOptions = {}): Promise<Run> {
  return new Promise((resolve) =>
    execFile(command, args, { maxBuffer: 64 << 20, encoding: 'utf8', ...options }, (err, stdout, stderr) => {
      const output = `${stdout}${stderr}`;
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, output: err && !output ? err.message : output });
    }),
  );
}

/** `command` as root: itself when root, else through `sudo -n` (environment variables as `env` arguments, which sudo keeps). */
function privileged(ability: Ability, command: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  const assignments = Object.entries(env).map(([name, value]) => `${name}=${value}`);
  if (ability.privilege === 'root') return run(command, args, { env: { ...process.env, ...env } });
  return run('sudo', ['-n', 'env', ...assignments, command, ...args]);
}

const tail = (output: string, lines = 15) => output.trimEnd().split('\n').slice(-lines).join('\n');

/**
 * The packages' installation. The `prometheus` package's scripts would start the packaged server
 * on :9090 (init script, or the systemd unit): the tests start their own on a free port, so
 * service starts are refused while packages install (policy-rc.d, Debian's mechanism) and the
 * unit is kept from starting at boot. No recommends: prometheus-node-exporter would take :9100,
 * the worker's default metrics port, and chromium's fonts come as its dependencies.
 */
class AptSession {
  /** apt-get update's outcome, once: a failed one (offline, say) fails each install the same way. */
  private update: Run | null = null;
  private policyAdded = false;
  private readonly cleanupOnSignal = () => {
    this.removePolicySync();
    process.exit(130);
  };

  constructor(private readonly ability: Ability) {}

  async install(pkg: AptPackage): Promise<Run> {
    if (!this.update) {
      await this.addPolicy();
      this.update = await privileged(this.ability, 'apt-get', ['update', '-q']);
    }
    if (this.update.code !== 0) return this.update;
    const done = await privileged(this.ability, 'apt-get', ['install', '-y', '-q', '--no-install-recommends', pkg], { DEBIAN_FRONTEND: 'noninteractive' });
    if (done.code === 0 && pkg === 'prometheus' && existsSync('/run/systemd/system')) {
      await privileged(this.ability, 'systemctl', ['disable', '--now', 'prometheus.service']);
    }
    return done;
  }

  private async addPolicy(): Promise<void> {
    if (existsSync(POLICY)) return;
    // Ctrl-C while apt-get runs: the machine must not keep refusing service starts.
    process.once('SIGINT', this.cleanupOnSignal).once('SIGTERM', this.cleanupOnSignal);
    const written = await privileged(this.ability, 'sh', ['-c', `printf '#!/bin/sh\\nexit 101\\n' > ${POLICY} && chmod 755 ${POLICY}`]);
    this.policyAdded = written.code === 0;
  }

  async close(): Promise<void> {
    process.off('SIGINT', this.cleanupOnSignal).off('SIGTERM', this.cleanupOnSignal);
    if (this.policyAdded) await privileged(this.ability, 'rm', ['-f', POLICY]);
    this.policyAdded = false;
  }

  private removePolicySync(): void {
    if (!this.policyAdded) return;
    if (this.ability.privilege === 'root') spawnSync('rm', ['-f', POLICY]);
    else spawnSync('sudo', ['-n', 'rm', '-f', POLICY]);
  }
}

const POLICY = '/usr/sbin/policy-rc.d';

/** Starts the PostgreSQL cluster that listens on `port` (the way Debian's packages run it), and says why when it cannot. */
async function startPostgres(ability: Ability, port: number): Promise<Run> {
  const listed = await run('pg_lsclusters', ['--no-header']);
  const cluster = parseClusters(listed.output).find((c) => c.port === port);
  if (!cluster) return { code: 1, output: `no PostgreSQL cluster of this machine is set to port ${port} (pg_lsclusters)` };
  if (cluster.online) return { code: 1, output: `cluster ${cluster.version}/${cluster.name} runs on port ${port} but does not answer` };
  return privileged(ability, 'pg_ctlcluster', ['--skip-systemctl-redirect', cluster.version, cluster.name, 'start']);
}

/** A Redis for the tests: loopback only, nothing kept on disk (the tests need no persistence). */
async function startRedis(ability: Ability, port: number): Promise<Run> {
  const made = await privileged(ability, 'mkdir', ['-p', '/var/lib/redis', '/var/log/redis']);
  if (made.code !== 0) return made;
  return privileged(ability, 'redis-server', [
    '--daemonize',
    'yes',
    '--bind',
    '127.0.0.1',
    '-::1',
    '--port',
    String(port),
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    '/var/lib/redis',
    '--logfile',
    '/var/log/redis/intake-test.log',
  ]);
}

/** Checks `check` again until it finds the prerequisite, for up to `ms`: a server takes a moment to answer. */
async function recheck(check: Prerequisite['check'], ms: number): Promise<Finding> {
  const deadline = Date.now() + ms;
  for (;;) {
    const finding = await check();
    if (!finding.missing || Date.now() >= deadline) return finding;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

export interface Provisioned {
  /** Every prerequisite's finding, after what was done. */
  findings: Finding[];
  /** Why what is still missing was not got (the `cannot` steps), for the report of what is missing. */
  cannot: string[];
}

/**
 * Checks `prerequisites`, gets what is missing that can be got here (`say` announces each, one
 * line), and checks those again. What fails says so under its finding; nothing here throws.
 */
export async function provision(prerequisites: Prerequisite[], say: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<Provisioned> {
  const findings: Finding[] = [];
  for (const p of prerequisites) findings.push(await p.check());
  const gaps = prerequisites.flatMap((p, i) => (findings[i].missing && p.remedy ? [{ name: p.name, remedy: p.remedy }] : []));
  if (gaps.length === 0) return { findings, cannot: [] };
  const ability = detectAbility(env);
  const steps = plan(gaps, ability);
  const apt = new AptSession(ability);
  try {
    for (const step of steps) {
      if (step.kind === 'cannot') continue;
      say(describe(step));
      const done =
        step.kind === 'install'
          ? await apt.install(step.pkg)
          : step.service === 'postgresql'
            ? await startPostgres(ability, step.port)
            : await startRedis(ability, step.port);
      if (done.code !== 0) {
        const why = tail(done.output);
        say(why.includes('\n') ? `  failed:\n${why.replace(/^/gm, '    ')}` : `  failed: ${why}`);
      }
      for (const name of step.for) {
        const i = prerequisites.findIndex((p) => p.name === name);
        // A server answers within seconds of its start; a package is there when apt-get ends.
        findings[i] = await recheck(prerequisites[i].check, step.kind === 'start' && done.code === 0 ? 60_000 : 0);
      }
    }
  } finally {
    await apt.close();
  }
  return { findings, cannot: steps.flatMap((s) => (s.kind === 'cannot' ? [describe(s)] : [])) };
}
