// A server of the checkout's own (the embedded PostgreSQL, a redis-server) is shared by every
// `intake` process of that folder that resolves to it: `npm start` and the commands run beside
// it reach the same data. Whoever finds none running starts it; each process that uses it is
// listed in its folder's `users/` (by pid), and the last one to let go stops it, so it stops with
// `npm start` unless a command still uses it, and a command run alone leaves nothing behind. A
// user that died without letting go (SIGKILL) is pruned: its server is found running and reused.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';

/** An error whose message is the one line to print (cli/intake.ts prints it as is and exits 1). */
export class LocalServiceError extends Error {}

export interface ServerKind {
  /** Its folder: `lock`, `users/` and whatever the server keeps there. */
  dir: string;
  /** The port of this folder's server when it runs and answers, else null. */
  running(): Promise<number | null>;
  /** Starts it; resolves with its port once it answers. */
  start(): Promise<number>;
  /** Stops it (nothing when it does not run). */
  stop(): Promise<void>;
}

export interface SharedServer {
  port: number;
  /** Whether this process started it. */
  started: boolean;
  /** Lets go: the last user stops the server. */
  release(): Promise<void>;
}

/** How long a process waits for another to finish starting or stopping the same server (an initdb on a loaded machine takes seconds). */
const LOCK_WAIT_MS = 120_000;

/** This process's use of `kind`'s server: the one running, or one it starts. */
export async function useServer(kind: ServerKind, pid = process.pid): Promise<SharedServer> {
  return (await acquire(kind, true, pid))!;
}

/** This process's use of `kind`'s server when one runs (null when none does): it starts none. */
export function joinServer(kind: ServerKind, pid = process.pid): Promise<SharedServer | null> {
  return acquire(kind, false, pid);
}

async function acquire(kind: ServerKind, mayStart: boolean, pid: number): Promise<SharedServer | null> {
  // Joining writes nothing where no server was ever started.
  if (!mayStart && !existsSync(kind.dir)) return null;
  await mkdir(path.join(kind.dir, 'users'), { recursive: true });
  const found = await withLock(kind.dir, pid, async () => {
    const running = await kind.running();
    if (running === null && !mayStart) return null;
    const result = running === null ? { port: await kind.start(), started: true } : { port: running, started: false };
    await (await open(userFile(kind, pid), 'w')).close();
    return result;
  });
  if (!found) return null;
  let released = false;
  return {
    ...found,
    release: async () => {
      if (released) return;
      released = true;
      await withLock(kind.dir, pid, async () => {
        await rm(userFile(kind, pid), { force: true });
        if ((await liveUsers(kind)).length === 0) await kind.stop();
      });
    },
  };
}

const userFile = (kind: ServerKind, pid: number) => path.join(kind.dir, 'users', String(pid));

/** The pids of the processes using the server; the files of dead ones are removed. */
async function liveUsers(kind: ServerKind): Promise<number[]> {
  const live: number[] = [];
  for (const name of await readdir(path.join(kind.dir, 'users')).catch(() => [])) {
    const pid = Number(name);
    if (Number.isInteger(pid) && isAlive(pid)) live.push(pid);
    else await rm(path.join(kind.dir, 'users', name), { force: true });
  }
  return live;
}

/**
 * Whether a process of this pid runs (EPERM: it does, as another user). A zombie does not: a
 * server whose starter has exited is reaped by pid 1, which some containers' init does seconds later.
 */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    // Linux: the state follows the command's name in parentheses, which may itself hold any character.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no /proc (macOS): kill's answer stands
  }
}

/**
 * Runs `work` holding the folder's lock (a file created exclusively, holding the pid): one
 * process at a time checks, starts, joins or stops the server. A lock whose holder died is
 * taken over.
 */
async function withLock<T>(dir: string, pid: number, work: () => Promise<T>): Promise<T> {
  const file = path.join(dir, 'lock');
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const handle = await open(file, 'wx');
      await handle.writeFile(String(pid));
      await handle.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number((await readFile(file, 'utf8').catch(() => '')).trim());
    // An empty file is a lock being written this moment, unless it stays so (its writer died then).
    const age = await stat(file).then(
      (s) => Date.now() - s.mtimeMs,
      () => 0,
    );
    if (holder ? !isAlive(holder) : age > 5000) {
      await rm(file, { force: true });
      continue;
    }
    if (Date.now() > deadline)
      throw new LocalServiceError(`${file} is held by process ${holder} for over ${LOCK_WAIT_MS / 1000} s: if that process hangs, end it`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  try {
    return await work();
  } finally {
    await rm(file, { force: true });
  }
}

/** Whether something accepts a TCP connection at host:port within `timeoutMs`. */
export function answers(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** A loopback port nothing listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Waits until `check` is true or `ms` passed; resolves with the last answer. */
export async function waitFor(check: () => Promise<boolean>, ms: number, intervalMs = 50): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** The last non-empty lines of a text (a server's log) joined into one, for a one-line error. */
export function lastLines(text: string, count = 2): string {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-count)
    .join(' / ');
}
