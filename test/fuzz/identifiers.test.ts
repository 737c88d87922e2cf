// Property (issue 10): identifiers of random length up to 100 KB and of any characters (NUL,
// lone surrogates, backslashes, multi-byte text) through all three endpoints. Nothing answers
// 500; every Track answered 202 is stored (`processed`, once, with the value sent); every
// Identify answers 200 and reads back through Profiles. An ID with an unpaired surrogate is the
// 400 of docs/decisions.md (free values such as the event name, email and phone keep them).
import test from 'ava';
import fc from 'fast-check';
import { eventsGet } from '../../cli/commands/events.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

const SCALE = Number(process.env.FUZZ_SCALE ?? 1);
const RUNS = Math.max(1, Math.round(25 * SCALE));

let h: Harness;
let gateway: { url: string; close(): Promise<void> };
let worker: { close(): Promise<void> };
let tenant: Tenant;

test.before(async () => {
  h = await openHarness({ WORKER_BATCH_WAIT_MS: '2' });
  gateway = await gatewayInProcess(h, { ownPool: true });
  worker = await workerInProcess(h);
  tenant = await newTenant(h);
});

test.after.always(async () => {
  await worker?.close();
  await gateway?.close();
  await closeEmptied(h);
});

const ALPHABETS = [
  'abcdefghijklmnopqrstuvwxyz0123456789',
  ' \t\\"/\0\u0001\u007f',
  'äöüßéñ€漢字かな😀🚀',
  '\ud800\udbff\udc00\udfff', // halves of surrogate pairs: mostly lone ones
];

/** With the `u` flag a paired surrogate is one code point, so \p{Cs} matches only unpaired ones. */
const UNPAIRED = /\p{Cs}/u;
const NOT_WELL_FORMED = 'String must be well-formed Unicode (no unpaired surrogate)';

/** A string of `length` UTF-16 units drawn from the alphabets, from a seed (incompressible, shrinkable by length). */
const identifier = fc
  .record({ length: fc.integer({ min: 1, max: 100_000 }), seed: fc.integer(), mix: fc.subarray([0, 1, 2, 3], { minLength: 1 }) })
  .map(({ length, seed, mix }) => {
    const chars = mix.flatMap((i) => [...ALPHABETS[i]].flatMap((c) => (c.length === 2 ? [c] : c.split(''))));
    let state = seed >>> 0 || 1;
    let out = '';
    while (out.length < length) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      out += chars[(state >>> 0) % chars.length];
    }
    // Never blank: a blank userId is the contract's 400, not what this property is about.
    return `x${out.slice(0, length - 1)}`;
  });

/** An ID: mostly well-formed (its unpaired surrogates made U+FFFD), sometimes as drawn. */
const id = fc.oneof({ weight: 3, arbitrary: identifier.map((s) => s.replace(/\p{Cs}/gu, '\ufffd')) }, { weight: 1, arbitrary: identifier });

const post = (api: 'track' | 'identify', body: unknown) =>
  request(gateway.url, `/api/${api}/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body, timeoutMs: 30_000 });

test('identifiers of any length and content: no 500, every 202 stored, every Identify read back', async (t) => {
  const accepted: { messageId: string; body: Record<string, unknown> }[] = [];
  await fc.assert(
    fc.asyncProperty(fc.record({ messageId: id, userId: id, anonymousId: id, event: identifier, email: identifier, phone: identifier }), async (ids) => {
      const body = trackBody({ ...ids, email: undefined, phone: undefined, messageId: `${accepted.length}:${ids.messageId}` });
      const tracked = await post('track', body);
      // Four IDs of up to 100 KB can pass the ~1 MB event measure (a lone surrogate is written
      // `\udXXX`, and the measure counts the JSON text encoded again): then 413 is the contract's answer.
      const measured = Buffer.byteLength(JSON.stringify(JSON.stringify(body)));
      const unpaired = [ids.messageId, ids.userId, ids.anonymousId].some((v) => UNPAIRED.test(v));
      if (tracked.status === 202 && !unpaired) accepted.push({ messageId: body.messageId as string, body });
      else if (tracked.status === 400 && unpaired && tracked.json?.error === NOT_WELL_FORMED) {
        // Refused, as an ID with an unpaired surrogate must be.
      } else if (tracked.status !== 413 || measured <= 1_000_000)
        throw new Error(`Track answered ${tracked.status} ${tracked.text.slice(0, 200)} (measured ~${measured} bytes)`);

      const identified = await post('identify', {
        userId: ids.userId,
        messageId: ids.messageId,
        traits: { email: ids.email, phone: ids.phone, n: accepted.length },
        consent: [
          { channel: 'email', status: 'granted' },
          { channel: 'sms', status: 'withdrawn' },
        ],
      });
      const refused = ['userId', 'messageId'].filter((f) => UNPAIRED.test(ids[f as 'userId' | 'messageId']));
      if (refused.length > 0) {
        const paths = (identified.json?.issues as { path: string[]; message: string }[] | undefined)
          ?.filter((i) => i.message === NOT_WELL_FORMED)
          .map((i) => i.path.join('.'));
        if (identified.status !== 400 || JSON.stringify(paths) !== JSON.stringify(refused))
          throw new Error(`Identify with an unpaired surrogate in ${refused} answered ${identified.status} ${identified.text.slice(0, 200)}`);
        return;
      }
      // The same messageId with other traits (an earlier run shrank to it) is the contract's 409.
      if (identified.status !== 200 && identified.status !== 409) throw new Error(`Identify answered ${identified.status} ${identified.text}`);
      // Every accepted user ID is well-formed, so it has a Profiles URL.
      if (identified.status === 200) {
        const read = await request(gateway.url, `/api/profiles/${tenant.slug}/${encodeURIComponent(ids.userId)}`, {
          method: 'GET',
          headers: { 'x-api-key': tenant.key },
          timeoutMs: 30_000,
        });
        if (read.status !== 200) throw new Error(`Profiles answered ${read.status} ${read.text.slice(0, 200)}`);
      }
    }),
    { numRuns: RUNS, includeErrorInReport: true },
  );

  for (const { messageId, body } of accepted) {
    const stored = await eventually(
      async () => {
        const got = (await eventsGet(h.operator, [tenant.slug, '--', messageId])) as { status: string; event: Record<string, unknown> };
        return got.status === 'processed' ? got : null;
      },
      { timeoutMs: 30_000 },
    );
    t.truthy(stored, `event ${JSON.stringify(messageId.slice(0, 40))} stored`);
    t.is(stored?.event.userId, body.userId);
    t.is(stored?.event.event, body.event);
  }
  t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId } }), accepted.length);
});
