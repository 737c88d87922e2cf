// Gateway and worker processes for the benchmark and the soak: started as deployed (their own
// processes, info logs), ready when they say so, stopped with SIGTERM; and wrk's loads, which
// every script of bench/ runs the same way.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Starts `node <args>` in the repository root; resolves with the port it logged, once `ready` matches its output. */
export function startProcess(
  args: string[],
  env: Record<string, string | undefined>,
  ready: RegExp,
  children: ChildProcess[],
): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (ready.test(out)) {
        const port = Number(/"port":(\d+)/.exec(out)?.[1] ?? 0);
        // Logged as deployed (one line per request), but not kept: a long run would fill memory.
        child.stdout!.removeAllListeners('data');
        child.stdout!.resume();
        resolve({ child, port });
      }
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}:\n${out}`)));
  });
}

export function stopProcess(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** Runs a script's main, then stops every process it started, whatever happened. */
export function runScript(main: () => Promise<void>, children: ChildProcess[]): void {
  main()
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    })
    .finally(async () => {
      await Promise.all(children.map(stopProcess));
      process.exit();
    });
}

/**
 * Runs wrk with `args` (a bench/wrk/*.lua script, which prints one `WRK_RESULT {…}` line) and
 * `env` for the script; resolves with that line's figures. The child joins `children`.
 */
export function runWrk(args: string[], env: Record<string, string>, children: ChildProcess[]): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { env: { ...process.env, LUA_PATH: 'bench/wrk/?.lua;;', ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => {
      const line = /WRK_RESULT (\{.*\})/.exec(out);
      if (code !== 0 || !line) return reject(new Error(`wrk exited with ${code}:\n${out}`));
      resolve(JSON.parse(line[1]) as Record<string, number>);
    });
  });
}
