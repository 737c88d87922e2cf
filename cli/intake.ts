// The `intake` command and the only composition root: it reads the configuration, builds
// the clients and hands them to the gateway, the workers or an operator command.
import { ConfigError, loadConfig, type Config } from '../common/config.ts';
import { createDb, type Db } from '../common/db.ts';
import { createLogger, type Logger } from '../common/logger.ts';
import { migrate } from '../common/migrate.ts';
import { startGateway } from '../gateway/server.ts';
import { startWorkers } from '../workers/main.ts';
import { UsageError } from './args.ts';
import { consentGet } from './commands/consent.ts';
import { envCreate, envRemove } from './commands/env.ts';
import { eventsGet, eventsNames } from './commands/events.ts';
import { keyCreate, keyList, keyRevoke } from './commands/key.ts';
import { orgCreate, orgFeatures } from './commands/org.ts';
import { OperatorError, openOperator, type OperatorDeps } from './operator.ts';

type Operator = (deps: OperatorDeps, argv: string[]) => Promise<unknown>;

const operators: Record<string, Record<string, Operator>> = {
  org: { create: orgCreate, features: orgFeatures },
  env: { create: envCreate, remove: envRemove },
  key: { create: keyCreate, list: keyList, revoke: keyRevoke },
  events: { names: eventsNames, get: eventsGet },
  consent: { get: consentGet },
};

const USAGE = `usage: intake <command>

processes:
  gateway                 HTTP gateway (PORT, HOST)
  worker                  queue workers
  migrate                 apply prisma/migrations, creating the database if missing
  dev                     migrate, then gateway and worker in one process

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
  consent get <org-slug> <email|sms> <address> [--purpose marketing|tracking] [--env <path-value>]`;

async function main(argv: string[]): Promise<number> {
  const [command, sub, ...rest] = argv;
  if (!command || command === 'help' || command === '--help') {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  const config = loadConfig();
  switch (command) {
    case 'migrate': {
      const result = await migrate(config.databaseUrl);
      console.log(JSON.stringify(result));
      return 0;
    }
    case 'gateway':
      return runProcess(config, 'gateway', async (db, log) => [await startGateway({ config, db, log })]);
    case 'worker':
      return runProcess(config, 'worker', async (db, log) => [await startWorkers({ config, db, log })]);
    case 'dev':
      await migrate(config.databaseUrl);
      return runProcess(config, 'dev', async (db, log) => [await startWorkers({ config, db, log }), await startGateway({ config, db, log })]);
  }
  const run = operators[command]?.[sub ?? ''];
  if (!run) throw new UsageError(`unknown command: ${[command, sub].filter(Boolean).join(' ')}`);
  return runOperator(config, run, rest);
}

/** A long-running process: start, then on SIGTERM/SIGINT drain and close in reverse order. */
async function runProcess(config: Config, name: string, start: (db: Db, log: Logger) => Promise<{ close(): Promise<void> }[]>): Promise<number> {
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

async function runOperator(config: Config, run: Operator, argv: string[]): Promise<number> {
  const operator = openOperator(config);
  try {
    console.log(JSON.stringify(await run(operator, argv)));
    return 0;
  } finally {
    await operator.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: Error) => {
    const expected = err instanceof OperatorError || err instanceof UsageError || err instanceof ConfigError;
    console.error(expected ? `intake: ${err.message}` : `intake: ${err.stack ?? err.message}`);
    if (err instanceof UsageError) console.error(USAGE);
    process.exit(expected && !(err instanceof UsageError) ? 1 : 2);
  },
);
