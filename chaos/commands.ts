// Operator commands (`node bin/intake.js users forget …`, `org create`, `key create`…) run as
// an operator would, on the fake clock, with their exit code, stdout and stderr kept.
import { spawn } from 'node:child_process';
import { INTAKE_BIN, INTAKE_ROOT } from './intake-process.ts';
import { onCleanup } from './cleanup.ts';

/** A command that has not exited after this long is killed (its exit code is then null). */
const COMMAND_BOUND_MS = 120_000;

export interface CommandResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  startedAt: number;
  endedAt: number;
}

export function runIntake(args: string[], env: Record<string, string>): Promise<CommandResult> {
  const startedAt = Date.now();
  const child = spawn(process.execPath, [INTAKE_BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    cwd: INTAKE_ROOT,
  });
  const kill = () => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Exited.
    }
  };
  const forget = onCleanup(`intake ${args.slice(0, 2).join(' ')}`, async () => kill(), kill);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(kill, COMMAND_BOUND_MS);
  return new Promise((resolve) => {
    child.once('error', (err) => {
      stderr += String(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      forget();
      resolve({ exitCode: code, stdout, stderr, startedAt, endedAt: Date.now() });
    });
  });
}

/** A setup command that must succeed: its stdout parsed as JSON. */
export async function runIntakeJson<T>(args: string[], env: Record<string, string>): Promise<T> {
  const result = await runIntake(args, env);
  if (result.exitCode !== 0) throw new Error(`intake ${args.join(' ')} exited ${result.exitCode}: ${result.stderr.trim()}`);
  return JSON.parse(result.stdout) as T;
}
