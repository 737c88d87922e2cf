// A client that sends its whole request at once, as HTTP clients do, reads the gateway's refusal
// of a body over the raw limit: the gateway answers 413 before reading the body and closes the
// connection, and a server that closes on bytes it has not read makes the kernel reset the
// connection, which can discard the answer the client has not read yet (node:http then reports
// EPIPE or ECONNRESET instead of the 413). So the gateway half-closes and reads on, dropping
// what arrives, until the client is done or the linger's bounds are spent (gateway/linger.ts).
import http from 'node:http';
import test from 'ava';
import { harnessWithProcesses, spawnIntake, type Child } from '../helpers/processes.ts';
import { newTenant, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let tenant: Tenant;
let gateway: Child;

harnessWithProcesses(
  test,
  async (opened, started) => {
    h = opened;
    tenant = await newTenant(h);
    gateway = await spawnIntake('gateway', h.env);
    started.push(gateway);
  },
  { emptied: true },
);

/** One request on a connection of its own, the body written at once; its status, or the socket error's code. */
function post(path: string, body: Buffer, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve) => {
    const req = http.request(`${gateway.url}${path}`, {
      method: 'POST',
      agent: false,
      headers: { 'x-api-key': tenant.key, 'content-type': 'application/json', ...headers },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve(`${res.statusCode} ${text}`));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
    req.end(body);
  });
}

/** 16 MiB: over both raw limits, within the linger's bytes. */
const BODY = Buffer.from(`{"type":"track","userId":"u","properties":{"s":"${'x'.repeat(16 * 1_048_576)}"}}`);

const cases = [
  { name: 'Track', path: () => `/api/track/${tenant.slug}`, answer: '413 {"error":"Track event is too large"}' },
  { name: 'Identify', path: () => `/api/identify/${tenant.slug}`, answer: '413 {"error":"Request body is too large"}' },
];

for (const c of cases) {
  test(`${c.name}: a body over the raw limit, sent whole at once, is answered 413 every time, by Content-Length or chunked`, async (t) => {
    const answers = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const headers: Record<string, string> = i % 2 ? { 'transfer-encoding': 'chunked' } : {};
      const answer = await post(c.path(), BODY, headers);
      answers.set(answer, (answers.get(answer) ?? 0) + 1);
    }
    t.deepEqual([...answers], [[c.answer, 40]]);
  });
}
