// A gateway or worker of the system under test: `node bin/intake.js gateway|worker` as a child
// process in a process group of its own (SIGKILL reaches it and anything it starts), its output
// appended to a log file of its own, on the fake clock. Ready once its /healthz answers 200.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup } from './cleanup.ts';

/**
 * The checkout whose `bin/intake.js` the run starts: this one, or CHAOS_INTAKE_ROOT (another
 * checkout or an extracted commit, with node_modules), to check a build other than the one at hand.
 */
export const INTAKE_ROOT = process.env.CHAOS_INTAKE_ROOT || path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const INTAKE_BIN = path.join(INTAKE_ROOT, 'bin/intake.js');

/** How long a gateway or worker may take to answer /healthz after it is started (on a busy machine). */
const START_BOUND_MS = 90_000;

export class IntakeProcess {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private readonly forget: () => void;

  constructor(
    readonly name: string,
    readonly role: 'gateway' | 'worker',
    /** PORT of a gateway, WORKER_METRICS_PORT of a worker. */
    readonly port: number,
    private readonly env: Record<string, string>,
    readonly logFile: string,
  ) {
    this.forget = onCleanup(
      name,
      () => this.kill(),
      () => this.killNow(),
    );
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== null;
  }

  async start(): Promise<void> {
    const log = openSync(this.logFile, 'a');
    const child = spawn(process.execPath, [INTAKE_BIN, this.role], {
      env: { ...process.env, ...this.env },
      stdio: ['ignore', log, log],
      detached: true,
      cwd: INTAKE_ROOT,
    });
    closeSync(log);
    this.child = child;
    this.exited = new Promise((resolve) =>
      child.once('exit', () => {
        if (this.child === child) this.child = null;
        resolve();
      }),
    );
    const deadline = Date.now() + START_BOUND_MS;
    while (Date.now() < deadline) {
      if (this.child !== child) throw new Error(`${this.name} exited while starting (see ${this.logFile})`);
      if (await healthy(this.url)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`${this.name} did not answer /healthz within ${START_BOUND_MS / 1000} s (see ${this.logFile})`);
  }

  /** Signals the whole process group and waits for the process to exit. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child?.pid) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // Gone already.
    }
    await this.exited;
  }

  /** Freezes (SIGSTOP) or thaws (SIGCONT) the whole process group; cleanup's SIGKILL ends it either way. */
  freeze(frozen: boolean): void {
    if (this.child?.pid)
      try {
        process.kill(-this.child.pid, frozen ? 'SIGSTOP' : 'SIGCONT');
      } catch {
        // Gone already.
      }
  }

  private killNow(): void {
    if (this.child?.pid)
      try {
        process.kill(-this.child.pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
  }

  async close(): Promise<void> {
    await this.kill();
    this.forget();
  }
}

async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

/** GET a path of a process's own port (metrics, health); the text, or null when it does not answer. */
export async function getText(url: string, timeoutMs = 3_000): Promise<{ text: string; date: string | null } | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    return res.status === 200 ? { text, date: res.headers.get('date') } : null;
  } catch {
    return null;
  }
}
