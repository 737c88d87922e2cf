// `intake gateway` (one process) runs its gateway on a thread of its own process, with the
// young generation GATEWAY_SEMI_SPACE_MB asks for (gateway/heap-thread.ts) and an old
// generation capped for its caches (docs/reliability.md, memory bounds); 0 keeps it on the main
// thread. Either way it is the process that was started: same pid, SIGTERM drains, exit 0.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import test from 'ava';
import { gatewayHeapLimits, oldGenerationMb } from '../../gateway/heap-thread.ts';
import { request } from '../helpers/http.ts';
import { spawnIntake } from '../helpers/processes.ts';
import { openHarness, type Harness } from '../helpers/services.ts';

let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => h.close());

const listening = (out: string) => JSON.parse(out.split('\n').find((l) => l.includes('"msg":"gateway listening"'))!);

for (const [env, young, old] of [
  [{}, 96, 512],
  [{ GATEWAY_SEMI_SPACE_MB: '8' }, 24, 512],
  // 256 + 3 × (200 + 16): the caches the command was configured with.
  [{ IDENTIFY_CACHE_MB: '200' }, 96, 904],
  [{ GATEWAY_SEMI_SPACE_MB: '0' }, null, null],
] as const) {
  const settings =
    Object.entries(env)
      .map(([name, value]) => `${name}=${value}`)
      .join(' ') || 'defaults';
  test(`${settings}: young generation ${young ?? 'node default, main thread'}, old ${old ?? 'node default'}; same pid, answers, drains on SIGTERM`, async (t) => {
    const gw = await spawnIntake('gateway', { ...h.env, ...env });
    t.teardown(() => void gw.kill('SIGKILL'));
    const line = listening(gw.output());
    t.is(line.youngGenerationMb, young);
    t.is(line.oldGenerationMb, old);
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

test("the gateway thread's old generation: 256 MB and three times the caches, at least 512 MB, as V8 takes it", async (t) => {
  t.is(oldGenerationMb(0), 512);
  t.is(oldGenerationMb(64 + 16), 512, 'the default caches');
  t.is(oldGenerationMb(1024 + 16), 3376);
  // What a thread started with these limits gets (V8's own heap limit adds the young generation).
  const thread = new Worker(
    "const { parentPort, resourceLimits } = require('node:worker_threads'); parentPort.postMessage({ resourceLimits, limit: require('node:v8').getHeapStatistics().heap_size_limit });",
    { eval: true, resourceLimits: gatewayHeapLimits(32, 200) },
  );
  const [got] = (await once(thread, 'message')) as [{ resourceLimits: { maxOldGenerationSizeMb: number; maxYoungGenerationSizeMb: number }; limit: number }];
  await thread.terminate();
  t.is(got.resourceLimits.maxOldGenerationSizeMb, 856);
  t.is(got.resourceLimits.maxYoungGenerationSizeMb, 96);
  t.true(got.limit >= 856 * 1_048_576 && got.limit <= (856 + 96 + 32) * 1_048_576, `heap limit ${Math.round(got.limit / 1_048_576)} MB`);
});
