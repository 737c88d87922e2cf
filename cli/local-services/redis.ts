// A redis-server of the checkout's own. No npm package ships a Redis server, so it is the
// machine's `redis-server`, started on a private loopback port with the append-only file on
// (what a 202 from Track relies on: docs/reliability.md) and its data in the folder, so queued
// events survive a restart as they would in production. It runs in a process group of its own:
// Ctrl-C in the terminal of `npm start` reaches intake alone, and the server stops after intake
// has drained.
import { spawn } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { freePort, isAlive, lastLines, LocalServiceError, waitFor, type ServerKind } from './shared.ts';

export interface LocalRedisDeps {
  /** Its folder: the append-only file, `redis.log`, and `server.json` (pid and port of the running server). */
  dir: string;
  /** The redis-server binary (findOnPath). */
  binary: string;
}

export function localRedis(deps: LocalRedisDeps): ServerKind {
  const state = path.join(deps.dir, 'server.json');
  const log = path.join(deps.dir, 'redis.log');
  const read = async () => JSON.parse(await readFile(state, 'utf8').catch(() => '{}')) as { pid?: number; port?: number };

  return {
    dir: deps.dir,

    async running() {
      const { pid, port } = await read();
      return pid && port && isAlive(pid) && (await pong(port)) ? port : null;
    },

    async start() {
      for (let attempt = 1; ; attempt++) {
        const port = await freePort();
        // These settings are the compose file's Redis (docker-compose.yml), on loopback only.
        const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', deps.dir, '--logfile', log];
        args.push('--appendonly', 'yes', '--appendfsync', 'everysec', '--save', '', '--maxmemory-policy', 'noeviction');
        const child = spawn(deps.binary, args, { cwd: deps.dir, detached: true, stdio: 'ignore' });
        child.unref();
        let exited: string | null = null;
        child.once('exit', (code, signal) => (exited = `exit ${signal ?? code}`));
        child.once('error', (err) => (exited = err.message));
        // Loading a large append-only file takes a while: it answers PING only once loaded.
        const up = await waitFor(async () => exited !== null || (await pong(port)), 60_000);
        if (up && exited === null) {
          await writeFile(state, JSON.stringify({ pid: child.pid, port }) + '\n');
          return port;
        }
        if (exited === null) child.kill('SIGKILL');
        const tail = lastLines(await readFile(log, 'utf8').catch(() => ''), 2);
        // Another process took the free port between the pick and the start: pick again.
        if (attempt < 3 && /already in use|could not create server/i.test(tail)) continue;
        throw new LocalServiceError(`redis-server did not start on 127.0.0.1:${port} (${exited ?? 'no answer within 60 s'}); ${path.basename(log)}: ${tail}`);
      }
    },

    async stop() {
      const { pid } = await read();
      if (pid && isAlive(pid)) {
        // SIGTERM: Redis writes out and fsyncs the append-only file, then exits.
        process.kill(pid, 'SIGTERM');
        if (!(await waitFor(async () => !isAlive(pid), 30_000, 50)))
          throw new LocalServiceError(`redis-server (pid ${pid}) did not stop within 30 s of SIGTERM`);
      }
      await rm(state, { force: true });
    },
  };
}

/** Whether a Redis on loopback `port` answers PING (not while it loads its data: it answers -LOADING then). */
function pong(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    let reply = '';
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.once('error', () => done(false));
  });
}

/** An executable of that name in one of PATH's folders, or null. */
export function findOnPath(name: string, pathVariable: string | undefined): string | null {
  for (const dir of (pathVariable ?? '').split(path.delimiter).filter(Boolean)) {
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not there
    }
  }
  return null;
}

/**
 * The one command that installs redis-server on this machine, or null when none is known: by
 * the package manager of the platform (macOS: Homebrew; Linux: the distribution's, from
 * /etc/os-release), with sudo unless run as root.
 */
export function installCommand(platform: NodeJS.Platform, uid: number, osRelease = readOsRelease()): string | null {
  const sudo = uid === 0 ? '' : 'sudo ';
  if (platform === 'darwin') return 'brew install redis';
  if (platform !== 'linux') return null;
  const ids = `${osRelease.ID ?? ''} ${osRelease.ID_LIKE ?? ''}`.split(/\s+/);
  const has = (...names: string[]) => names.some((n) => ids.includes(n));
  if (has('debian', 'ubuntu')) return `${sudo}apt-get install redis-server`;
  if (has('fedora', 'rhel', 'centos')) return `${sudo}dnf install redis`;
  if (has('alpine')) return `${sudo}apk add redis`;
  if (has('arch')) return `${sudo}pacman -S redis`;
  if (has('suse', 'opensuse')) return `${sudo}zypper install redis`;
  return null;
}

function readOsRelease(): Record<string, string> {
  let text = '';
  try {
    text = readFileSync('/etc/os-release', 'utf8');
  } catch {
    return {};
  }
  const fields: Record<string, string> = {};
  for (const m of text.matchAll(/^([A-Z_]+)=("?)(.*)\2$/gm)) fields[m[1]] = m[3];
  return fields;
}
