// The `intake` command and the only composition root: it reads the configuration, builds
// the clients and hands them to the gateway, the workers or an operator command.
// Modules are imported when a command needs them, not up front: Prisma's client, BullMQ, Koa
// and the rest take most of a second to load, which an operator command would pay every time.
import { setFlagsFromString } from 'node:v8';
import { ConfigError, loadConfig, type Config } from '../common/config.ts';
import type { Db } from '../common/db.ts';
import type { Logger } from '../common/logger.ts';
import { stringifyJson } from '../common/domain/json-text.ts';
import { UsageError } from './args.ts';
import { OperatorError, loadQueueModules, openOperator, type OperatorDeps } from './operator.ts';

type Operator = (deps: OperatorDeps, argv: string[]) => Promise<unknown>;
type LazyOperator = () => Promise<Operator>;

/** The commands of one module (command name → the function's name), imported when one runs. */
function lazy<M>(
  load: () => Promise<M>,
  commands: Record<string, { [K in keyof M]: M[K] extends Operator ? K : never }[keyof M]>,
): Record<string, LazyOperator> {
  return Object.fromEntries(Object.entries(commands).map(([name, member]) => [name, async () => (await load())[member] as Operator]));
}

const operators: Record<string, Record<string, LazyOperator>> = {
  org: lazy(() => import('./commands/org.ts'), { create: 'orgCreate', features: 'orgFeatures' }),
  env: lazy(() => import('./commands/env.ts'), { create: 'envCreate', remove: 'envRemove' }),
  key: lazy(() => import('./commands/key.ts'), { create: 'keyCreate', list: 'keyList', revoke: 'keyRevoke' }),
  events: lazy(() => import('./commands/events.ts'), { names: 'eventsNames', get: 'eventsGet', activity: 'eventsActivity', retry: 'eventsRetry' }),
  journey: lazy(() => import('./commands/journey.ts'), {
    create: 'journeyCreate',
    publish: 'journeyPublish',
    list: 'journeyList',
    stats: 'journeyStatsCommand',
    runs: 'journeyRuns',
  }),
  consent: lazy(() => import('./commands/consent.ts'), { get: 'consentGet' }),
};
// The commands that read the queues: they load BullMQ (the rest never do).
const QUEUE_COMMANDS = new Set(['events get', 'events activity', 'events retry']);

const USAGE = `usage: intake <command>

processes:
  gateway                 HTTP gateway (PORT, HOST)
  worker                  queue workers
  migrate                 apply prisma/migrations, creating the database if missing
  dashboard               queue dashboard (DASHBOARD_PORT; basic auth when DASHBOARD_PASSWORD is set;
                          read-only unless DASHBOARD_READ_ONLY=false)
  dev                     migrate, then gateway, worker and dashboard in one process
                          (the dashboard is skipped with a warning when DASHBOARD_PORT is taken)

operator commands (one JSON document on stdout):
  org create <slug> [--features f1,f2]
  org features <slug> --set f1,f2
  env create <org-slug> <path-value> --key <environment-key>
  env remove <org-slug> <path-value>
  key create <org-slug> [--env <path-value>]
  key list <org-slug> [--env <path-value>]
  key revoke <org-slug> <suffix> [--env <path-value>]
  events names <org-slug> [--env <path-value>] [--days 30]
  events get <org-slug> <messageId> [--env <path-value>]
  events activity <org-slug> [--env <path-value>] [--limit 100]
  events retry <org-slug> <messageId> [--env <path-value>]
  journey create <org-slug> --file <journey.json> [--env <path-value>]
  journey publish <org-slug> <journey-id> [--env <path-value>]
  journey list <org-slug> [--env <path-value>]
  journey stats <org-slug> <journey-id> [--env <path-value>]
  journey runs <org-slug> <journey-id> [--user <userId>] [--env <path-value>]
  consent get <org-slug> <email|sms> <address> [--purpose marketing|tracking] [--env <path-value>]

client commands (through the public API; one JSON summary on stdout, progress on stderr):
  import <org-slug> --file <customers.ndjson> [--env <path-value> [--env-key <environment-key>]]
         [--concurrency 10] [--url http://127.0.0.1:3000] [--key <key> | INTAKE_API_KEY]
                          one Identify call per line; resumes an interrupted import from
                          <file>.checkpoint.json; failed lines go to <file>.failed.ndjson`;

async function main(argv: string[]): Promise<number> {
  const [command, sub, ...rest] = argv;
  if (command === 'help' || command === '--help') {
    console.log(USAGE);
    return 0;
  }
  if (!command) throw new UsageError('expected a command');
  const config = loadConfig();
  switch (command) {
    case 'migrate': {
      const { migrate } = await import('../common/migrate.ts');
      const result = await migrate(config.databaseUrl);
      console.log(JSON.stringify(result));
      return 0;
    }
    case 'gateway':
      return runProcess(config, 'gateway', async (db, log) => {
        const { startGateway } = await import('../gateway/server.ts');
        return [await startGateway({ config, db, log })];
      });
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
        import('../common/migrate.ts'),
        import('../workers/main.ts'),
        import('../gateway/server.ts'),
      ]);
      await migrate(config.databaseUrl);
      return runProcess(config, 'dev', async (db, log) => [
        await startWorkers({ config, db, log }),
        await startGateway({ config, db, log }),
        ...(await devDashboard(config, db, log)),
      ]);
    }
  }
  // A caller of the public API (the gateway's URL and a key), not an operator of the database.
  if (command === 'import') return printJson(await (await import('./commands/import.ts')).importCommand(config, argv.slice(1)));
  const load = operators[command]?.[sub ?? ''];
  if (!load) throw new UsageError(`unknown command: ${[command, sub].filter(Boolean).join(' ')}`);
  return runOperator(config, await load(), rest, QUEUE_COMMANDS.has(`${command} ${sub}`));
}

/**
 * On a laptop the dashboard is a convenience: a taken DASHBOARD_PORT (another checkout's `dev`,
 * say) must not stop the gateway and worker, so it is skipped with a warning.
 */
async function devDashboard(config: Config, db: Db, log: Logger): Promise<{ close(): Promise<void> }[]> {
  const { startDashboard } = await import('../gateway/dashboard.ts');
  try {
    return [await startDashboard({ config, db, log })];
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    log.warn({ port: config.dashboardPort }, 'dashboard not started: DASHBOARD_PORT is in use');
    return [];
  }
}

/** A long-running process: start, then on SIGTERM/SIGINT drain and close in reverse order. */
async function runProcess(config: Config, name: string, start: (db: Db, log: Logger) => Promise<{ close(): Promise<void> }[]>): Promise<number> {
  const [{ createLogger }, { createDb }] = await Promise.all([import('../common/logger.ts'), import('../common/db.ts')]);
  const log = createLogger(config.logLevel, name);
  const db = createDb(config, log);
  const parts = await start(db, log);
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
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

async function runOperator(config: Config, run: Operator, argv: string[], queues: boolean): Promise<number> {
  // Prisma plans each query in WebAssembly. V8 would spend about 0.3 s of a command's two or
  // three queries optimizing that code (TurboFan), worth it in a gateway, not here: baseline
  // code only (Liftoff). The flag applies to modules compiled after it, so before Prisma loads.
  setFlagsFromString('--liftoff-only');
  const { createDb } = await import('../common/db.ts');
  const operator = openOperator(config, createDb(config), queues ? await loadQueueModules() : undefined);
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
    const hint = usage ? ' (intake help lists the commands)' : '';
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
