// `intake gateway` (one process) runs its gateway on a thread of its own process, with the
// young generation GATEWAY_SEMI_SPACE_MB asks for (gateway/heap-thread.ts); 0 keeps it on the
// main thread. Either way it is the process that was started: same pid, SIGTERM drains, exit 0.
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import test from 'ava';
import { request } from '../helpers/http.ts';
import { spawnIntake } from '../helpers/processes.ts';
import { openHarness, type Harness } from '../helpers/services.ts';

let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => h.close());

const listening = (out: string) => JSON.parse(out.split('\n').find((l) => l.includes('"msg":"gateway listening"'))!);

for (const [semiSpace, young] of [
  ['', 96],
  ['8', 24],
  ['0', null],
] as const) {
  test(`GATEWAY_SEMI_SPACE_MB=${semiSpace || '(default 32)'}: young generation ${young ?? 'node default, main thread'}; same pid, answers, drains on SIGTERM`, async (t) => {
    const gw = await spawnIntake('gateway', { ...h.env, ...(semiSpace ? { GATEWAY_SEMI_SPACE_MB: semiSpace } : {}) });
    t.teardown(() => void gw.kill('SIGKILL'));
    const line = listening(gw.output());
    t.is(line.youngGenerationMb, young);
    t.is(line.pid, gw.process.pid, 'the process that was started serves');
    t.is((await request(gw.url, '/healthz', { method: 'GET' })).status, 200);
    t.is(await gw.kill('SIGTERM'), 0);
    t.regex(gw.output(), /"msg":"shutting down"/);
  });
}

test('a gateway thread that cannot start ends the process with its one line on stderr and exit 1', async (t) => {
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => taken.close());
  const port = String((taken.address() as net.AddressInfo).port);
  const child = spawn(process.execPath, [path.resolve('bin/intake.js'), 'gateway'], {
    env: { ...process.env, ...h.env, PORT: port, HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise((resolve) => child.once('exit', resolve));
  t.is(code, 1);
  t.is(err, `intake: listen EADDRINUSE: address already in use 127.0.0.1:${port}\n`);
});
