// An erasure racing joins: Identify calls from new user IDs carrying one person's email arrive
// at a steady rate (100–200 a second) in the organization that joins by email, so each joins
// the person's profile; the erasure of the person starts 1–3 s in, beside a control command
// whose wall time the checker subtracts (generator.ts forgetBesideControl; another environment,
// so it neither waits for the joins' locks nor for the erasure's). The joins go on until 2 s
// after the erasure exits.
import type { Recorder } from './history.ts';
import { answered } from './history.ts';
import { identifyBody } from './bodies.ts';
import { ClientConnections } from './http-client.ts';
import type { Step } from './plan.ts';
import { forgetBesideControl, sendIdentify, sleep, targets } from './generator.ts';
import type { System } from './system.ts';

/** Joins in flight at once: enough for 200 a second with a slow PostgreSQL, few enough to stay modest. */
const MAX_IN_FLIGHT = 64;
/** Connections the joins spread over (per gateway). */
const CONNECTIONS = 6;
/** However long the erasure takes, the joins stop after this. */
const JOINS_BOUND_MS = 45_000;
const TICK_MS = 20;

export async function erasureUnderJoins(sys: System, rec: Recorder, step: Step, index: number): Promise<void> {
  const tag = `ej${rec.history.seed}-${index}`;
  const person = `${tag}-0`;
  const email = `${tag}@example.test`;
  const conns = Array.from({ length: CONNECTIONS }, (_, i) => new ClientConnections(`joiner-${index}-${i}`));
  const gateways = targets(sys);
  const request = (userId: string, i: number) => identifyBody(`${tag}-m${i}`, userId, email, { plan: 'joined' }, sys.clock.now() - 1_000);
  const identify = (body: ReturnType<typeof request>, i: number) => sendIdentify(sys, rec, conns[i % CONNECTIONS], gateways[i % gateways.length], 'a', body);
  try {
    // The person exists before anyone joins it (a retry sends the same body).
    const first = request(person, 0);
    for (let attempt = 0; attempt < 3; attempt++) {
      const op = await identify(first, attempt);
      if (answered(op.outcome) && op.outcome.status === 200) break;
      await sleep(500);
    }
    const startedAt = Date.now();
    let inFlight = 0;
    let n = 1;
    let owed = 0;
    let stopAt = startedAt + JOINS_BOUND_MS;
    const pending = new Set<Promise<unknown>>();
    const erasure = (async () => {
      await sleep(step.eraseAfterMs);
      await forgetBesideControl(sys, rec, 'a', person, `${tag}-nobody`, { purpose: 'join-erasure' });
      stopAt = Math.min(stopAt, Date.now() + 2_000);
    })();
    while (Date.now() < stopAt) {
      owed += (step.joinRate * TICK_MS) / 1000;
      while (owed >= 1 && inFlight < MAX_IN_FLIGHT) {
        owed -= 1;
        const i = n++;
        inFlight++;
        const call = identify(request(`${tag}-${i}`, i), i).finally(() => {
          inFlight--;
          pending.delete(call);
        });
        pending.add(call);
      }
      // Behind by more than a second (PostgreSQL slow): drop the debt rather than burst later.
      owed = Math.min(owed, step.joinRate);
      await sleep(TICK_MS);
    }
    await erasure;
    await Promise.all(pending);
  } finally {
    for (const c of conns) c.close();
  }
}
