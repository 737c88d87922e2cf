// A process of its own that plays the tenants stalling their uploads (test/faults/tenant-lockout.test.ts):
// it opens STALL_COUNT connections to STALL_URL, 50 at a time, 2,000 a second (a burst of SYNs
// can overflow the listen backlog, and a dropped SYN is retried only after a second), each
// sending its headers with a valid key and the first byte of a STALL_BYTES-byte body, then
// nothing. The tenants: STALL_PATH and STALL_KEY, or STALL_TENANTS, a JSON list of {path, key}
// taken in turn. With STALL_HOLD_MS, each upload answered within that time opens again, as a
// client that keeps its uploads stalled would: at once after a cut (408), after its Retry-After
// after a refusal (429). Once every connection has its answer and is closed it prints one JSON
// line: each answer (tenant, status, ms after sending, the headers that matter, body) and close time.
// Apart from the measuring test, so its sockets do not delay that process's own calls: in life
// the tenants are other clients.
import { setTimeout as sleep } from 'node:timers/promises';
import { holdUpload, type HeldUpload } from './uploads.ts';

interface Target {
  path: string;
  key: string;
}

const url = process.env.STALL_URL!;
const targets: Target[] = process.env.STALL_TENANTS
  ? (JSON.parse(process.env.STALL_TENANTS) as Target[])
  : [{ path: process.env.STALL_PATH!, key: process.env.STALL_KEY! }];
const count = Number(process.env.STALL_COUNT);
const bytes = Number(process.env.STALL_BYTES);
const holdMs = Number(process.env.STALL_HOLD_MS ?? 0);

type Answer = { tenant: number; status: number; ms: number; retryAfter?: string; connection?: string; body: string } | null;

const answers: Promise<Answer>[] = [];
const closed: Promise<number>[] = [];
const openedAt = performance.now();
const holding = () => performance.now() - openedAt < holdMs;

function open(tenant: number): void {
  const { path, key } = targets[tenant];
  const upload: HeldUpload = holdUpload(url, path, { 'X-Api-Key': key, 'Content-Type': 'application/json', 'Content-Length': bytes }, '{');
  closed.push(upload.closed);
  answers.push(
    upload.answer.then((a) => {
      if (!a) return null;
      if (holding() && (a.status === 408 || a.status === 429)) {
        const after = a.status === 429 ? Number(a.headers['retry-after'] ?? 1) * 1000 : 0;
        // Opened again once the gateway has closed this one, as a client would after its answer.
        void upload.closed.then(() => sleep(after)).then(() => holding() && open(tenant));
      }
      return { tenant, status: a.status, ms: a.ms, retryAfter: a.headers['retry-after'], connection: a.headers.connection, body: a.body };
    }),
  );
}

for (let opened = 0; opened < count;) {
  for (let i = 0; i < 50 && opened < count; i++, opened++) open(opened % targets.length);
  await sleep(25);
}
const openMs = performance.now() - openedAt;
if (holdMs > 0) await sleep(Math.max(0, holdMs - openMs));
// Uploads opened again go on pushing to both lists until the hold ends: wait until they stop growing.
let settled = 0;
while (settled < answers.length) {
  settled = answers.length;
  await Promise.all([...answers, ...closed]);
  // A reopening waits on its close and then its Retry-After.
  if (holdMs > 0) await sleep(1100);
}
const result = { openMs, answers: await Promise.all(answers), closed: await Promise.all(closed) };
process.stdout.write(`${JSON.stringify(result)}\n`);
