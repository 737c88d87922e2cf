// The `intake` command and the only composition root: it reads the configuration, builds
// the clients and hands them to the gateway, the workers or an operator command.
import cluster from 'node:cluster';
import { ConfigError, loadConfig, type Config } from '../common/config.ts';
import { createDb, type Db } from '../common/db.ts';
import { createLogger, type Logger } from '../common/logger.ts';
import { stringifyJson } from '../common/domain/json-text.ts';
import { migrate } from '../common/migrate.ts';
import { startDashboard } from '../gateway/dashboard.ts';
import { startGateway } from '../gateway/server.ts';
import { joinCluster } from '../gateway/cluster/member.ts';
import { runGatewayPrimary } from '../gateway/cluster/primary.ts';
import { processConfig } from '../gateway/cluster/share.ts';
import { startWorkers } from '../workers/main.ts';
import { readArgs, route, UsageError } from './args.ts';
import { consentGet } from './commands/consent.ts';
import { envCreate, envRemove } from './commands/env.ts';
import { eventsActivity, eventsGet, eventsNames, eventsRetry } from './commands/events.ts';
import { importCommand } from './commands/import.ts';
import { journeyCreate, journeyList, journeyPublish, journeyRuns, journeyStatsCommand } from './commands/journey.ts';
import { keyCreate, keyList, keyRevoke } from './commands/key.ts';
import { orgCreate, orgFeatures } from './commands/org.ts';
import { OperatorError, openOperator, type OperatorDeps } from './operator.ts';
import { spec, type CommandName, type OperatorName, type ProcessName } from './usage.ts';

type Operator = (deps: OperatorDeps, argv: string[]) => Promise<unknown>;

const operators: Record<OperatorName, Operator> = {
  'org create': orgCreate,
  'org features': orgFeatures,
  'env create': envCreate,
  'env remove': envRemove,
  'key create': keyCreate,
  'key list': keyList,
  'key revoke': keyRevoke,
  'events names': eventsNames,
  'events get': eventsGet,
  'events activity': eventsActivity,
  'events retry': eventsRetry,
  'journey create': journeyCreate,
  'journey publish': journeyPublish,
  'journey list': journeyList,
  'journey stats': journeyStatsCommand,
  'journey runs': journeyRuns,
  'consent get': consentGet,
};

async function main(argv: string[]): Promise<number> {
  // Before the configuration: help needs none, and a usage mistake is reported as such.
  const routed = route(argv);
  if ('help' in routed) return printUsage(routed.help, routed.exit);
  const { command } = routed;
  // A caller of the public API (the gateway's URL and a key), not an operator of the database.
  if (command === 'import') return printJson(await importCommand(loadConfig(), routed.argv));
  if (isProcess(command)) {
    readArgs(routed.argv, command); // they take no arguments
    return runNamedProcess(command, loadConfig());
  }
  return runOperator(loadConfig(), operators[command], routed.argv);
}

function isProcess(command: CommandName): command is ProcessName {
  return spec(command).section === 'process';
}

async function runNamedProcess(command: ProcessName, config: Config): Promise<number> {
  switch (command) {
    case 'migrate': {
      const result = await migrate(config.databaseUrl);
      console.log(JSON.stringify(result));
      return 0;
    }
    case 'gateway':
      return runGateway(config);
    case 'worker':
      return runProcess(config, 'worker', async (db, log) => [await startWorkers({ config, db, log })]);
    case 'dashboard':
      return runProcess(config, 'dashboard', async (db, log) => [await startDashboard({ config, db, log })]);
    case 'dev':
      await migrate(config.databaseUrl);
      return runProcess(config, 'dev', async (db, log) => [
        await startWorkers({ config, db, log }),
        await startGateway({ config, db, log }),
        ...(await devDashboard(config, db, log)),
      ]);
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
async function devDashboard(config: Config, db: Db, log: Logger): Promise<{ close(): Promise<void> }[]> {
  try {
    return [await startDashboard({ config, db, log })];
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    log.warn({ port: config.dashboardPort }, 'dashboard not started: DASHBOARD_PORT is in use');
    return [];
  }
}

/**
 * One gateway process, or with GATEWAY_PROCESSES > 1 a cluster primary (gateway/cluster/) that
 * runs this same command in that many processes, each a whole gateway with its share of the
 * gateway's bounds (gateway/cluster/share.ts).
 */
async function runGateway(config: Config): Promise<number> {
  if (cluster.isWorker) {
    const member = joinCluster(config.gatewayProcesses);
    const share = processConfig(config, config.gatewayProcesses);
    return runProcess(share, 'gateway', async (db, log) => [await startGateway({ config: share, db, log, cluster: member })], member.stopped);
  }
  if (config.gatewayProcesses === 1) return runProcess(config, 'gateway', async (db, log) => [await startGateway({ config, db, log })]);
  const log = createLogger(config.logLevel, 'gateway-primary');
  const code = await runGatewayPrimary(config, log);
  await new Promise<void>((resolve) => log.flush(() => resolve()));
  return code;
}

/** The first SIGTERM or SIGINT. */
function signalled(): Promise<string> {
  return new Promise((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
}

/**
 * A long-running process: start, then on SIGTERM/SIGINT (or `stopped`, when given) drain and
 * close in reverse order.
 */
async function runProcess(
  config: Config,
  name: string,
  start: (db: Db, log: Logger) => Promise<{ close(): Promise<void> }[]>,
  stopped?: Promise<string>,
): Promise<number> {
  const log = createLogger(config.logLevel, name);
  const db = createDb(config, log);
  const parts = await start(db, log);
  const signal = await (stopped ?? signalled());
  log.info({ signal }, 'shutting down');
  const force = setTimeout(() => {
    log.error('shutdown took too long; exiting');
    process.exit(1);
  }, config.shutdownTimeoutMs + 5000).unref();
  for (const part of parts.reverse()) await part.close();
  await db.$disconnect();
  clearTimeout(force);
  // Logs are written asynchronously; let the last lines out before process.exit.
  await new Promise<void>((resolve) => log.flush(() => resolve()));
  return 0;
}

async function runOperator(config: Config, run: Operator, argv: string[]): Promise<number> {
  const operator = openOperator(config);
  try {
    return await printJson(await run(operator, argv));
  } finally {
    await operator.close();
  }
}

/** The one JSON document of a command on stdout. */
async function printJson(value: unknown): Promise<number> {
  // An event's properties may nest deeper than JSON.stringify recurses.
  const output = stringifyJson(value) + '\n';
  // A pipe takes large output asynchronously: exiting before the write drains would cut it.
  await new Promise<void>((resolve, reject) => process.stdout.write(output, (err) => (err ? reject(err) : resolve())));
  return 0;
}

/** Errors of the environment a process starts in (a taken port, an unknown host): one line, like a bad setting. */
const STARTUP_CODES = new Set(['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL', 'ENOTFOUND']);

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: Error & { code?: string }) => {
    const usage = err instanceof UsageError;
    const expected = err instanceof OperatorError || usage || err instanceof ConfigError || STARTUP_CODES.has(err.code ?? '');
    // One line on stderr (product.md). Settings read "A: why; B: why". Of anything else, the
    // last line of its message: Prisma puts the cause there, after a source excerpt.
    const line = expected ? err.message.replace(/:\n\s+/, ': ').replace(/\s*\n\s*/g, '; ') : `${err.name}: ${lastLine(err.message)}`;
    const hint = usage ? ` (${err.hint})` : '';
    // LOG_LEVEL=debug: the stack of the unexpected follows, for a bug report.
    const stack = !expected && /^(debug|trace)$/.test(process.env.LOG_LEVEL ?? '') ? `\n${err.stack}` : '';
    process.stderr.write(`intake: ${line}${hint}${stack}\n`, () => process.exit(usage ? 2 : 1));
  },
);

function lastLine(message: string): string {
  return (
    message
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? 'unknown error'
  );
}
