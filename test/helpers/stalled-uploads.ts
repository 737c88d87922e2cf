// A process of its own that plays the tenant stalling its uploads (test/faults/tenant-lockout.test.ts):
// it opens STALL_COUNT connections to STALL_URL + STALL_PATH, 50 at a time, 2,000 a second
// (a burst of SYNs can overflow the listen backlog, and a dropped SYN is retried only after a
// second), each sending its headers with STALL_KEY and the first byte of a STALL_BYTES-byte
// body, then nothing; once every connection has its answer and is closed it prints one JSON
// line: each answer (status, ms after sending, the headers that matter, body) and close time.
// Apart from the measuring test, so its 1,000 sockets do not delay that process's own calls:
// in life the two tenants are two clients.
import { setTimeout as sleep } from 'node:timers/promises';
import { holdUpload } from './uploads.ts';

const { STALL_URL, STALL_PATH, STALL_KEY } = process.env;
const count = Number(process.env.STALL_COUNT);
const bytes = Number(process.env.STALL_BYTES);
const headers = { 'X-Api-Key': STALL_KEY!, 'Content-Type': 'application/json', 'Content-Length': bytes };

const uploads: ReturnType<typeof holdUpload>[] = [];
const openedAt = performance.now();
for (let wave = 0; uploads.length < count; wave++) {
  for (let i = 0; i < 50 && uploads.length < count; i++) uploads.push(holdUpload(STALL_URL!, STALL_PATH!, headers, '{'));
  await sleep(25);
}
const openMs = performance.now() - openedAt;
const answers = await Promise.all(uploads.map((u) => u.answer));
const closed = await Promise.all(uploads.map((u) => u.closed));
const result = {
  openMs,
  answers: answers.map((a) => a && { status: a.status, ms: a.ms, retryAfter: a.headers['retry-after'], connection: a.headers.connection, body: a.body }),
  closed,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
