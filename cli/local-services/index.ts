// PostgreSQL and Redis of the checkout's own, for a machine that has only Node.js (and a package
// manager): `intake dev` (npm start) and the operator commands resolve DATABASE_URL=embedded, or
// an unset DATABASE_URL whose default address nothing answers at, to the embedded PostgreSQL of
// the folder they run in (.intake/postgres), and an unset REDIS_URL whose default address
// nothing answers at to a redis-server of that folder (.intake/redis), starting either when it
// does not run. The processes of a deployment (`intake gateway`, `intake worker`, `intake
// dashboard`) start nothing: DATABASE_URL=embedded makes them use the server `npm start` runs, and
// an unset setting stays its default. docs/configuration.md describes it for users.
import path from 'node:path';
import { embeddedPostgres } from './postgres.ts';
import { findOnPath, installCommand, localRedis } from './redis.ts';
import { answers, joinServer, LocalServiceError, useServer, type SharedServer } from './shared.ts';

export { LocalServiceError } from './shared.ts';
export { installCommand } from './redis.ts';

/** DATABASE_URL's value that names the embedded PostgreSQL. */
export const EMBEDDED = 'embedded';
/** The folder of the checkout (the working directory) that holds the servers' data. */
export const DATA_FOLDER = '.intake';

const STOPS = 'it stops with the last intake process of this folder that uses it';

/**
 * - `dev`: `intake dev`, which needs both and may start both;
 * - `command`: an operator command; it may start either (Redis only when redis-server is there:
 *   most commands never use Redis, and one that does says so when it cannot reach it);
 * - `migrate`: PostgreSQL only;
 * - `process`: a process of a deployment: DATABASE_URL=embedded only, and only a server running.
 */
export type LocalMode = 'dev' | 'command' | 'migrate' | 'process';

export interface LocalServicesDeps {
  /** Read, and DATABASE_URL and REDIS_URL are set in it to the servers they resolve to (processes and threads started later inherit them). */
  env: NodeJS.ProcessEnv;
  /** The checkout: the data is under its .intake/. */
  cwd: string;
  /** The defaults of DATABASE_URL and REDIS_URL (platform/config.ts). */
  defaults: { databaseUrl: string; redisUrl: string };
  /** This process's user id (-1 where there is none): PostgreSQL runs as the user postgres under root. */
  uid: number;
  platform: NodeJS.Platform;
  /** One line for a human (stderr). */
  say(line: string): void;
  /** What the process is called in what it says (`intake dev`). */
  name: string;
}

export interface LocalServices {
  /** Lets go of the servers: the last process using one stops it. Never throws: a failure is said in one line. */
  close(): Promise<void>;
}

/**
 * The address an unset setting stands for: its default, or in the tests (which cannot make the
 * machine's own servers go away) INTAKE_DEFAULT_DATABASE_URL / INTAKE_DEFAULT_REDIS_URL.
 */
export function defaultAddress(env: NodeJS.ProcessEnv, name: 'DATABASE_URL' | 'REDIS_URL', fallback: string): { url: string; overridden: boolean } {
  const override = env[`INTAKE_DEFAULT_${name}`];
  return override ? { url: override, overridden: true } : { url: fallback, overridden: false };
}

/** Whether something listens at a URL's host and port; a URL naming no TCP host (a socket folder) counts as answering. */
async function answersAt(url: string, defaultPort: number): Promise<boolean> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return true; // the configuration reports it
  }
  if (!parsed.hostname) return true;
  return answers(parsed.hostname.replace(/^\[|\]$/g, ''), Number(parsed.port || defaultPort));
}

const where = (url: string, defaultPort: number) => {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || defaultPort}`;
};

export async function openLocalServices(mode: LocalMode, deps: LocalServicesDeps): Promise<LocalServices> {
  const { env } = deps;
  const held: SharedServer[] = [];
  const rel = (dir: string) => path.relative(deps.cwd, dir) || '.';
  const close = async () => {
    for (const server of held.splice(0).reverse()) {
      await server.release().catch((err: Error) => deps.say(`intake: ${err.message}`));
    }
  };
  try {
    // Redis first: a missing redis-server stops `intake dev` at once, before PostgreSQL's slower start.
    const redisWanted = (mode === 'dev' || mode === 'command') && env.REDIS_URL === undefined && !env.REDIS_CLUSTER_NODES?.trim();
    if (redisWanted) {
      const address = defaultAddress(env, 'REDIS_URL', deps.defaults.redisUrl);
      if (await answersAt(address.url, 6379)) {
        if (address.overridden) env.REDIS_URL = address.url;
      } else {
        const reason = `no Redis answers at ${where(address.url, 6379)} and REDIS_URL is unset`;
        const binary = findOnPath('redis-server', env.PATH);
        if (binary) {
          const kind = localRedis({ dir: path.join(deps.cwd, DATA_FOLDER, 'redis'), binary });
          const server = await useServer(kind);
          held.push(server);
          env.REDIS_URL = `redis://127.0.0.1:${server.port}`;
          if (mode === 'dev' || server.started)
            deps.say(
              `intake: ${reason}: ${server.started ? "started this machine's" : 'using the running'} redis-server on 127.0.0.1:${server.port} ` +
                `(append-only file on, data in ${rel(kind.dir)}; ${STOPS})`,
            );
        } else if (mode === 'dev') {
          const install = installCommand(deps.platform, deps.uid);
          throw new LocalServiceError(
            install
              ? `${reason}, and redis-server is not installed to start one: ${install} (or set REDIS_URL)`
              : `${reason}, and redis-server is not on PATH to start one: install Redis 6.2 or later, or set REDIS_URL`,
          );
        }
      }
    }

    const forced = env.DATABASE_URL === EMBEDDED;
    let pgReason: string | null = null;
    if (forced) pgReason = `DATABASE_URL=${EMBEDDED}`;
    else if (env.DATABASE_URL === undefined && mode !== 'process') {
      const address = defaultAddress(env, 'DATABASE_URL', deps.defaults.databaseUrl);
      if (await answersAt(address.url, 5432)) {
        if (address.overridden) env.DATABASE_URL = address.url;
      } else pgReason = `no PostgreSQL answers at ${where(address.url, 5432)} and DATABASE_URL is unset`;
    }
    if (pgReason) {
      const kind = embeddedPostgres({ dir: path.join(deps.cwd, DATA_FOLDER, 'postgres'), env, uid: deps.uid });
      const server = mode === 'process' ? await joinServer(kind) : await useServer(kind);
      if (!server)
        throw new LocalServiceError(
          `DATABASE_URL=${EMBEDDED}: no embedded PostgreSQL runs in ${rel(kind.dir)}, and ${deps.name} starts none: ` +
            'run npm start (intake dev) in this folder first, or set DATABASE_URL to a PostgreSQL URL',
        );
      held.push(server);
      env.DATABASE_URL = `postgresql://postgres@127.0.0.1:${server.port}/intake`;
      if (mode === 'dev' || server.started)
        deps.say(
          `intake: ${pgReason}: ${server.started ? 'started' : 'using'} the embedded PostgreSQL ${await kind.version()} on 127.0.0.1:${server.port} ` +
            `(data in ${rel(kind.dir)}; ${STOPS})`,
        );
    }
    return { close };
  } catch (err) {
    await close();
    throw err;
  }
}
