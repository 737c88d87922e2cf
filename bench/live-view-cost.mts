// `node --import tsx bench/live-view-cost.mts`: what the dashboard's live view costs the API.
// One gateway process (and a worker, so Track's queue drains), with the live recorder as
// shipped (LIVE_IDENTIFY_CALLS=200) and with Identify calls not recorded (0), alternately,
// ROUNDS rounds of wrk per API and setting; prints the median requests per second of each and
// the median CPU the gateway process spent per request (read from /proc: on a shared machine
// throughput follows the neighbours' load, a request's own CPU much less).
// Rates are recorded either way (every 10 s, from counters the gateway keeps anyway).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../common/config.ts';
import { createDb } from '../common/db.ts';
import { migrate } from '../common/migrate.ts';
import { keyCreate } from '../cli/commands/key.ts';
import { orgCreate } from '../cli/commands/org.ts';
import { loadQueueModules, openOperator } from '../cli/operator.ts';
import { withCpu } from './cpu-usage.mts';

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_bench';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECONDS = Number(process.env.SECONDS ?? 8);
const PREFIX = `bench-live-${randomBytes(3).toString('hex')}`;

await migrate(DATABASE_URL);
const env = { ...process.env, DATABASE_URL, REDIS_URL, QUEUE_PREFIX: PREFIX, LOG_LEVEL: 'warn', HOST: '127.0.0.1', INTAKE_ENV_FILE: '' };
const config = loadConfig(env);
const operator = openOperator(config, createDb(config), await loadQueueModules());
const slug = `bench-live-${randomBytes(3).toString('hex')}`;
await orgCreate(operator, [slug]);
const { key } = await keyCreate(operator, [slug]);

function start(command: string, extra: Record<string, string>, ready: RegExp): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['bin/intake.js', command], { env: { ...env, LOG_LEVEL: 'info', ...extra }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c;
      if (ready.test(out)) resolve({ child, port: Number(/"port":(\d+)/.exec(out)?.[1] ?? 0) });
    });
    child.once('exit', (code) => reject(new Error(`${command} exited ${code}:\n${out}`)));
  });
}

const stop = (child: ChildProcess) => new Promise((resolve) => (child.once('exit', resolve), child.kill('SIGTERM')));

function wrk(script: string, port: number, api: string): Promise<{ rps: number; requests: number }> {
  const args = ['-t', '2', '-c', '32', '-d', `${SECONDS}s`, '--timeout', '10s', '-s', `bench/wrk/${script}`, `http://127.0.0.1:${port}/api/${api}/${slug}`];
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, {
      env: { ...process.env, LUA_PATH: 'bench/wrk/?.lua;;', BENCH_API_KEY: key, BENCH_RUN_ID: randomBytes(4).toString('hex') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.once('exit', () => {
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)?.[1];
      const requests = /(\d+) requests in/.exec(out)?.[1];
      if (rps && requests) resolve({ rps: Number(rps), requests: Number(requests) });
      else reject(new Error(out));
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const worker = await start('worker', { WORKER_METRICS_PORT: '0' }, /"msg":"worker started"/);
const results: Record<string, number[]> = {};
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const calls of round % 2 ? ['0', '200'] : ['200', '0']) {
      const gateway = await start('gateway', { PORT: '0', LIVE_IDENTIFY_CALLS: calls, GATEWAY_PROCESSES: '1' }, /"msg":"gateway listening"/);
      for (const [api, script] of [
        ['identify', 'identify.lua'],
        ['track', 'track.lua'],
      ]) {
        const { rps, requests, cpu } = await withCpu(gateway.child.pid!, () => wrk(script, gateway.port, api));
        const cpuUs = Math.round((cpu.server * 1000) / requests);
        (results[`${api} LIVE_IDENTIFY_CALLS=${calls} req/s`] ??= []).push(rps);
        (results[`${api} LIVE_IDENTIFY_CALLS=${calls} gateway CPU µs/request`] ??= []).push(cpuUs);
        console.log(`round ${round + 1} ${api} LIVE_IDENTIFY_CALLS=${calls}: ${rps} req/s, gateway CPU ${cpuUs} µs/request`);
      }
      await stop(gateway.child);
    }
  }
} finally {
  await stop(worker.child);
  await operator.eventsQueue().obliterate({ force: true });
  await operator.close();
}
for (const [name, values] of Object.entries(results)) console.log(`${name}: median ${median(values)} (${values.join(', ')})`);
