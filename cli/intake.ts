// The `intake` command and the only composition root: it reads the configuration, builds
// the clients and hands them to the gateway, the workers or an operator command.
// Modules are imported when a command needs them, not up front: Prisma's client, BullMQ, Koa
// and the rest take most of a second to load, which an operator command would pay every time.
import cluster from 'node:cluster';
import { isMainThread } from 'node:worker_threads';
import { setFlagsFromString } from 'node:v8';
import { ConfigError, describeConfig, loadConfig, type Config } from '../platform/config.ts';
import { EnvFileError, loadEnvFile } from '../platform/env-file.ts';
import type { Db } from '../platform/db.ts';
import { holdLines, type Logger } from '../platform/logger.ts';
import { stringifyJson } from '../platform/json-text.ts';
import { readArgs, route, UsageError } from './args.ts';
import { lastLine, settingHint } from './setting-errors.ts';
import { OperatorError, STREAMED, loadQueueModules, openOperator, type OperatorDeps } from '../operations/operator.ts';
import { spec, type CommandName, type OperatorName, type ProcessName } from './usage.ts';
import { LocalServiceError } from './local-services/shared.ts';
import type { LocalMode } from './local-services/index.ts';

type Operator = (deps: OperatorDeps, argv: string[]) => Promise<unknown>;
type LazyOperator = () => Promise<Operator>;

/** A command's function, imported from its module when it runs. */
const lazy =
  <M>(load: () => Promise<M>, member: { [K in keyof M]: M[K] extends Operator ? K : never }[keyof M]): LazyOperator =>
  async () =>
    (await load())[member] as Operator;

const org = () => import('./commands/org.ts');
const env = () => import('./commands/env.ts');
const key = () => import('./commands/key.ts');
const events = () => import('./commands/events.ts');
const journey = () => import('./commands/journey.ts');
const users = () => import('./commands/users.ts');
const operatorCommands = () => import('./commands/operators.ts');

const operators: Record<OperatorName, LazyOperator> = {
  'org create': lazy(org, 'orgCreate'),
  'org features': lazy(org, 'orgFeatures'),
  'env create': lazy(env, 'envCreate'),
  'env remove': lazy(env, 'envRemove'),
  'env list': lazy(env, 'envList'),
  'key create': lazy(key, 'keyCreate'),
  'key list': lazy(key, 'keyList'),
  'key revoke': lazy(key, 'keyRevoke'),
  'events names': lazy(events, 'eventsNames'),
  'events get': lazy(events, 'eventsGet'),
  'events activity': lazy(events, 'eventsActivity'),
  'events retry': lazy(events, 'eventsRetry'),
  'journey create': lazy(journey, 'journeyCreate'),
  'journey publish': lazy(journey, 'journeyPublish'),
  'journey list': lazy(journey, 'journeyList'),
  'journey stats': lazy(journey, 'journeyStatsCommand'),
  'journey runs': lazy(journey, 'journeyRuns'),
  'consent get': lazy(() => import('./commands/consent.ts'), 'consentGet'),
  storage: lazy(() => import('./commands/storage.ts'), 'storageCommand'),
  'users forget': lazy(users, 'usersForget'),
  'users suppress': lazy(users, 'usersSuppress'),
  'users unsuppress': lazy(users, 'usersUnsuppress'),
  'users suppressed': lazy(users, 'usersSuppressed'),
  'users audit': lazy(users, 'usersAudit'),
  'users export': lazy(users, 'usersExport'),
  'operator add': lazy(operatorCommands, 'operatorAdd'),
  'operator remove': lazy(operatorCommands, 'operatorRemove'),
  'operator list': lazy(operatorCommands, 'operatorList'),
  'operator token': lazy(operatorCommands, 'operatorToken'),
  'operator audit': lazy(operatorCommands, 'operatorAudit'),
};
// The commands that read the queues: they load BullMQ (the rest never do).
const QUEUE_COMMANDS = new Set(['events get', 'events activity', 'events retry', 'users forget']);

async function main(argv: string[]): Promise<number> {
  // Before the configuration: help needs none, and a usage mistake is reported as such.
  const routed = route(argv);
  if ('help' in routed) return printUsage(routed.help, routed.exit);
  const { command } = routed;
  // This checkout's .env, under what the environment sets: every command and process of it reads the same settings.
  fromFile.push(...loadEnvFile().names);
  if (command === 'config') {
    const out = (await import('./commands/config.ts')).configCommand(loadConfig(), routed.argv);
    return 'text' in out ? printText(out.text) : printJson(out.json);
  }
  // A caller of the public API (the gateway's URL and a key), not an operator of the database.
  if (command === 'import') return printJson(await (await import('./commands/import.ts')).importCommand(loadConfig(), routed.argv));
  if (isProcess(command)) {
    readArgs(routed.argv, command); // they take no arguments
    return withLocalServices(command, (config) => runNamedProcess(command, config));
  }
  const operator = await operators[command]();
  return withLocalServices(command, (config) => runOperator(config, operator, routed.argv, QUEUE_COMMANDS.has(command)));
}

/**
 * Runs `run` once DATABASE_URL and REDIS_URL name servers: where the settings ask for the
 * checkout's own (DATABASE_URL=embedded) or leave a default that nothing answers at, the embedded
 * PostgreSQL and a redis-server of this folder, started when they do not run, except by the
 * processes of a deployment (cli/local-services/). This process lets go of them when `run` ends.
 */
async function withLocalServices(command: CommandName, run: (config: Config) => Promise<number>): Promise<number> {
  const config = loadConfig(); // every bad setting is reported before anything starts
  // A gateway's thread and a cluster member inherit the resolved settings from the process that started them.
  if (!isMainThread || cluster.isWorker) return run(config);
  const { openLocalServices } = await import('./local-services/index.ts');
  const defaultOf = (name: string) => describeConfig().find((s) => s.env === name)!.default;
  const local = await openLocalServices(localMode(command), {
    env: process.env,
    cwd: process.cwd(),
    defaults: { databaseUrl: defaultOf('DATABASE_URL'), redisUrl: defaultOf('REDIS_URL') },
    uid: process.getuid?.() ?? -1,
    platform: process.platform,
    name: `intake ${command}`,
    say: (line) => process.stderr.write(line + '\n'),
  });
  try {
    return await run(loadConfig());
  } finally {
    await local.close();
  }
}

function localMode(command: CommandName): LocalMode {
  if (command === 'dev' || command === 'migrate') return command;
  return isProcess(command) ? 'process' : 'command';
}

function isProcess(command: CommandName): command is ProcessName {
  return spec(command).section === 'process';
}

async function runNamedProcess(command: ProcessName, config: Config): Promise<number> {
  // From the start, so that a signal during start-up is not lost; `migrate` ends by itself, and
  // Ctrl-C ends it at once. A gateway's thread gets its signal from the main thread.
  if (command !== 'migrate' && isMainThread) stopSignals = listenForStop();
  switch (command) {
    case 'migrate': {
      const { migrate } = await import('./migrate.ts');
      const result = await migrate(config.databaseUrl);
      console.log(JSON.stringify(result));
      return 0;
    }
    case 'gateway':
      return runGateway(config);
    case 'worker':
      return runProcess(config, 'worker', async (db, log) => {
        const { startWorkers } = await import('../workers/main.ts');
        return [await startWorkers({ config, db, log })];
      });
    case 'dashboard':
      return runProcess(config, 'dashboard', async (db, log) => {
        const { startDashboard } = await import('../gateway/dashboard.ts');
        return [await startDashboard({ config, db, log })];
      });
    case 'dev': {
      const [{ migrate }, { startWorkers }, { startGateway }] = await Promise.all([
        import('./migrate.ts'),
        import('../workers/main.ts'),
        import('../gateway/server.ts'),
      ]);
      await migrate(config.databaseUrl);
      return runProcess(config, 'dev', async (db, log) => {
        // The summary is what a terminal shows first once the parts listen: their start-up lines
        // wait for it, for at most DEV_HOLD_MS, so that a start-up stuck on a server that does not
        // answer still shows its warnings; a failed start-up writes them before its error.
        const release = holdLines(log, DEV_HOLD_MS);
        try {
          const workers = await startWorkers({ config, db, log });
          const gateway = await startGateway({ config, db, log });
          const dashboard = await devDashboard(config, db, log);
          await printDevSummary(config, { gateway: gateway.port, workerMetrics: workers.metricsPort, dashboard: dashboard?.port ?? null });
          return [workers, gateway, ...(dashboard ? [dashboard] : [])];
        } finally {
          release();
        }
      });
    }
  }
}

/** Asked-for help on stdout (exit 0); the usage of a group given without its command on stderr (exit 2). */
async function printUsage(text: string, exit: 0 | 2): Promise<number> {
  const stream = exit === 0 ? process.stdout : process.stderr;
  await new Promise<void>((resolve, reject) => stream.write(text + '\n', (err) => (err ? reject(err) : resolve())));
  return exit;
}

/**
 * On a laptop the dashboard is a convenience: a taken DASHBOARD_PORT (another checkout's `dev`,
 * say) must not stop the gateway and worker, so it is skipped with a warning.
 */
async function devDashboard(config: Config, db: Db, log: Logger): Promise<{ port: number; close(): Promise<void> } | null> {
  const { startDashboard } = await import('../gateway/dashboard.ts');
  try {
    return await startDashboard({ config, db, log });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    log.warn({ port: config.dashboardPort }, 'dashboard not started: DASHBOARD_PORT is in use');
    return null;
  }
}

/** How long `npm start` holds its start-up log lines for its summary at most. */
const DEV_HOLD_MS = 10_000;

/**
 * `npm start`'s few lines for a human: where each part answers. Written once every part listens,
 * so the ports are the ones taken (PORT=0 picks one) and a part that did not start is said so,
 * and before the start-up's log lines, held until then. On stderr: stdout carries the JSON log
 * lines, one document each, which a log collector parses; a terminal shows both.
 */
async function printDevSummary(config: Config, ports: { gateway: number; workerMetrics: number | null; dashboard: number | null }): Promise<void> {
  const url = (host: string, port: number, path = '') => {
    // A wildcard address is reached on loopback; an IPv6 literal needs its brackets in a URL.
    const reach = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
    return `http://${reach}:${port}${path}`;
  };
  const absent = (setting: string) => `none: ${setting} could not be listened on (the log says why)`;
  const lines = [
    'intake is running: gateway, worker and dashboard in this process (Ctrl-C stops them; JSON log lines on stdout)',
    `  gateway           ${url(config.host, ports.gateway)}`,
    `  dashboard         ${ports.dashboard === null ? absent('DASHBOARD_PORT') : url(config.dashboardHost, ports.dashboard, '/')}`,
    `  live view         ${ports.dashboard === null ? absent('DASHBOARD_PORT') : url(config.dashboardHost, ports.dashboard, '/live')}`,
    `  gateway metrics   ${url(config.host, ports.gateway, '/metrics')}`,
    `  worker metrics    ${ports.workerMetrics === null ? absent('WORKER_METRICS_PORT') : url(config.host, ports.workerMetrics, '/metrics')}`,
  ];
  await new Promise<void>((resolve) => process.stderr.write(lines.join('\n') + '\n', () => resolve()));
}

/**
 * One gateway process, or with GATEWAY_PROCESSES > 1 a cluster primary (gateway/cluster/) that
 * runs this same command in that many processes, each a whole gateway with its share of the
 * gateway's bounds (gateway/cluster/share.ts).
 */
async function runGateway(config: Config): Promise<number> {
  if (cluster.isWorker) {
    const { startGateway } = await import('../gateway/server.ts');
    const [{ joinCluster }, { processConfig }] = await Promise.all([import('../gateway/cluster/member.ts'), import('../gateway/cluster/share.ts')]);
    const member = joinCluster(config.gatewayProcesses);
    const share = processConfig(config, config.gatewayProcesses);
    return runProcess(share, 'gateway', async (db, log) => [await startGateway({ config: share, db, log, cluster: member })], member.stopped);
  }
  if (config.gatewayProcesses === 1) {
    // The gateway on a thread of this process, whose heap is sized for it (gateway/heap-thread.ts).
    const { onGatewayThread, runOnGatewayThread, signalFromMainThread } = await import('../gateway/heap-thread.ts');
    if (!onGatewayThread && config.gatewaySemiSpaceMb > 0) {
      // The thread hears only the signals that come once it runs: one that came before stops it here.
      if (stopSignals?.received()) return 0;
      return runOnGatewayThread(['gateway'], config.gatewaySemiSpaceMb, config.identifyCacheMb + config.keyCacheMb);
    }
    const { startGateway } = await import('../gateway/server.ts');
    return runProcess(config, 'gateway', async (db, log) => [await startGateway({ config, db, log })], onGatewayThread ? signalFromMainThread() : undefined);
  }
  const [{ createLogger }, { runGatewayPrimary }] = await Promise.all([import('../platform/logger.ts'), import('../gateway/cluster/primary.ts')]);
  const log = createLogger(config.logLevel, 'gateway-primary');
  // The primary listens for its own signals from here on: one that came before stops it here.
  if (stopSignals?.received()) return 0;
  const code = await runGatewayPrimary(config, log);
  await flushLogs(log);
  return code;
}

interface StopSignals {
  /** Settles with the first SIGTERM or SIGINT. */
  first: Promise<NodeJS.Signals>;
  /** The first, once it came (null before). */
  received(): NodeJS.Signals | null;
  /** `handle` is called with each signal after the first. */
  onRepeat(handle: (signal: NodeJS.Signals) => void): void;
}

/** A long-running process's signals (none on a gateway's thread, nor for `migrate`). */
let stopSignals: StopSignals | undefined;

/**
 * Listens to SIGTERM and SIGINT for the rest of the process: the first starts the graceful
 * shutdown, and every later one is absorbed. Ctrl-C reaches every process of the terminal's
 * foreground group, so under `npm start` the service gets the terminal's SIGINT and then the one
 * npm passes on, and a user may press it again while it drains: Node's default action for any
 * of those would end the process mid-drain, cutting off the requests and jobs it had accepted.
 * Absorbing them waits for nothing unbounded: runProcess exits after SHUTDOWN_TIMEOUT_MS + 5 s
 * whatever is left (the multi-process gateway's primary has its own bound), and SIGKILL or SIGQUIT
 * (Ctrl-\) still end the process at once.
 */
function listenForStop(): StopSignals {
  let first: NodeJS.Signals | null = null;
  let repeat: (signal: NodeJS.Signals) => void = () => {};
  let settle!: (signal: NodeJS.Signals) => void;
  const settled = new Promise<NodeJS.Signals>((resolve) => (settle = resolve));
  const on = (signal: NodeJS.Signals) => {
    if (first) return repeat(signal);
    first = signal;
    settle(signal);
  };
  process.on('SIGTERM', on);
  process.on('SIGINT', on);
  return { first: settled, received: () => first, onRepeat: (handle) => (repeat = handle) };
}

/**
 * A long-running process: start, then on the first SIGTERM/SIGINT (or `stopped`, when given)
 * drain and close in reverse order.
 */
async function runProcess(
  config: Config,
  name: string,
  start: (db: Db, log: Logger) => Promise<{ close(): Promise<void> }[]>,
  stopped?: Promise<string>,
): Promise<number> {
  const [{ createLogger }, { createDb }] = await Promise.all([import('../platform/logger.ts'), import('../platform/db.ts')]);
  const log = createLogger(config.logLevel, name);
  const db = createDb(config, log);
  const parts = await start(db, log);
  const signal = await (stopped ?? (stopSignals ??= listenForStop()).first);
  log.info({ signal }, 'shutting down');
  let toldOnce = false;
  stopSignals?.onRepeat((again) => {
    if (toldOnce) return;
    toldOnce = true;
    log.info({ signal: again, shutdownTimeoutMs: config.shutdownTimeoutMs }, 'already shutting down');
  });
  const force = setTimeout(() => {
    log.error('shutdown took too long; exiting');
    process.exit(1);
  }, config.shutdownTimeoutMs + 5000).unref();
  for (const part of parts.reverse()) await part.close();
  await db.$disconnect();
  clearTimeout(force);
  // Logs are written asynchronously; let the last lines out before process.exit.
  await flushLogs(log);
  return 0;
}

/**
 * Every log line written. sonic-boom calls a flush's callback when the write in flight ends,
 * before the lines buffered meanwhile are written (on the gateway's thread, whose exit does not
 * write them, "gateway stopped" was lost that way): a second flush writes those.
 */
async function flushLogs(log: Logger): Promise<void> {
  for (let i = 0; i < 2; i++) await new Promise<void>((resolve) => log.flush(() => resolve()));
}

async function runOperator(config: Config, run: Operator, argv: string[], queues: boolean): Promise<number> {
  // Prisma plans each query in WebAssembly. V8 would spend about 0.3 s of a command's two or
  // three queries optimizing that code (TurboFan), worth it in a gateway, not here: baseline
  // code only (Liftoff). The flag applies to modules compiled after it, so before Prisma loads.
  setFlagsFromString('--liftoff-only');
  const { createDb } = await import('../platform/db.ts');
  const operator = openOperator(config, createDb(config), queues ? await loadQueueModules() : undefined);
  try {
    const out = await run(operator, argv);
    return out === STREAMED ? 0 : await printJson(out);
  } finally {
    await operator.close();
  }
}

/** The one JSON document of a command on stdout. */
async function printJson(value: unknown): Promise<number> {
  // An event's properties may nest deeper than JSON.stringify recurses.
  return printText(stringifyJson(value));
}

async function printText(text: string): Promise<number> {
  // A pipe takes large output asynchronously: exiting before the write drains would cut it.
  await new Promise<void>((resolve, reject) => process.stdout.write(text + '\n', (err) => (err ? reject(err) : resolve())));
  return 0;
}

/** The settings read from the env file (an error they cause says so). */
const fromFile: string[] = [];

/** A setting behind an unexpected error, named (null when none is known or the configuration itself is bad). */
function hintFor(err: Error): string | null {
  try {
    return settingHint(err, loadConfig(), fromFile);
  } catch {
    return null;
  }
}

/** Errors of the environment a process starts in (a taken port, an unknown host): one line, like a bad setting. */
const STARTUP_CODES = new Set(['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL', 'ENOTFOUND']);

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: Error & { code?: string }) => {
    const usage = err instanceof UsageError;
    const expected =
      err instanceof OperatorError ||
      usage ||
      err instanceof ConfigError ||
      err instanceof EnvFileError ||
      err instanceof LocalServiceError ||
      STARTUP_CODES.has(err.code ?? '');
    const hint = expected ? null : hintFor(err);
    // One line on stderr (product.md). Settings read "A: why; B: why". An error a setting
    // explains names the setting; of anything else, the last line of its message: Prisma puts
    // the cause there, after a source excerpt.
    const line = expected
      ? err.message.replace(/:\n\s+/, ': ').replace(/\s*\n\s*/g, '; ')
      : (hint ?? `${err.name}: ${lastLine(err.message) || 'unknown error'}`);
    const usageHint = usage ? ` (${err.hint})` : '';
    // LOG_LEVEL=debug: the stack of the unexpected follows, for a bug report.
    const stack = !expected && /^(debug|trace)$/.test(process.env.LOG_LEVEL ?? '') ? `\n${err.stack}` : '';
    process.stderr.write(`intake: ${line}${usageHint}${stack}\n`, () => process.exit(usage ? 2 : 1));
  },
);
