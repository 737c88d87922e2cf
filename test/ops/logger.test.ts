// The log destination buffers lines (platform/logger.ts); a line still reaches stdout within
// the flush interval while the process keeps running, and a warning goes out at once.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Runs `body` (with `log` in scope) in a child that then idles 3 s; resolves with each line, how long before the child's exit it arrived. */
function linesOf(body: string, idle = 'setTimeout(() => {}, 3000)'): Promise<{ line: Record<string, unknown>; ms: number }[]> {
  const script = `import { createLogger } from './platform/logger.ts'; const log = createLogger('info', 'logger-test'); ${body}; ${idle};`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  const started = performance.now();
  const lines: { line: Record<string, unknown>; ms: number }[] = [];
  let rest = '';
  child.stdout.on('data', (chunk: Buffer) => {
    const parts = (rest + chunk.toString()).split('\n');
    rest = parts.pop()!;
    for (const p of parts) lines.push({ line: JSON.parse(p), ms: performance.now() - started });
  });
  return new Promise((resolve) =>
    child.once('exit', () => {
      const exited = performance.now() - started;
      resolve(lines.map((l) => ({ line: l.line, ms: exited - l.ms })));
    }),
  );
}

test('an info line is written within the flush interval while the process runs, not held until it exits', async (t) => {
  const lines = await linesOf(`log.info({ n: 1 }, 'first'); setTimeout(() => log.info({ n: 2 }, 'second'), 1000)`);
  t.deepEqual(
    lines.map((l) => l.line.msg),
    ['first', 'second'],
  );
  // Held in the buffer, both would arrive as the child exits; the timed flush writes each well before.
  for (const { line, ms } of lines) t.true(ms > 1000, `${String(line.msg)} arrived ${Math.round(ms)} ms before the exit`);
});

test('a warning is written at once, with the buffered lines before it, in order', async (t) => {
  const lines = await linesOf(`log.info('before'); log.warn('careful')`);
  t.deepEqual(
    lines.map((l) => l.line.msg),
    ['before', 'careful'],
  );
  t.is(lines[1].line.level, 40);
});

test('process.exit right after logging loses no buffered line, also with writes in flight (pino writes the rest on exit)', async (t) => {
  const lines = await linesOf(`for (let i = 0; i < 20000; i++) log.info({ i }, 'line')`, 'process.exit(0)');
  t.is(lines.length, 20000);
  t.deepEqual(
    lines.slice(-3).map((l) => l.line.i),
    [19997, 19998, 19999],
  );
});
