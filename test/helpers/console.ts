// The operator console and admin API under test: `intake operator …` run as a user runs it
// (stdin included), and a database of the test file's own, since whether any operator exists
// changes what the whole dashboard does.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CliRun } from '../security/cli.ts';

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/intake.js');

/** `intake <args>` with `input` on its stdin. */
export function intakeWithInput(env: Record<string, string>, args: string[], input: string): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [bin, ...args], { env: { ...process.env, ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
    child.stdin!.end(input);
  });
}

/** `intake operator add <name> --role <role> --password-stdin`; throws unless it succeeded. */
export async function addOperatorByCli(env: Record<string, string>, name: string, role: 'admin' | 'read-only', password: string) {
  const run = await intakeWithInput(env, ['operator', 'add', name, '--role', role, '--password-stdin'], `${password}\n`);
  if (run.code !== 0) throw new Error(`operator add ${name}: exit ${run.code}: ${run.stderr}`);
  return JSON.parse(run.stdout) as { name: string; role: string; createdAt: number };
}
