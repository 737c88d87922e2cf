// Property: random histories of Identify calls for a few users (random timestamps with ties,
// traits, consent decisions, reused messageIds), sent by concurrent clients through two
// gateway processes, end as the pure rules applied to the same calls one after the other in
// arrival order: the answers, the stored profiles and the stored consent decisions.
//
// Arrival order: each user's client sends its calls one at a time (the next after the answer),
// while the users' clients run at once and pick a gateway per call; so a user's arrival order
// is its send order, and calls of different users (which share no profile, address or
// messageId here) may sit in the same batches in any mix.
import { randomBytes } from 'node:crypto';
import test from 'ava';
import fc from 'fast-check';
import { addressAsOf, addressFromTraits, normalizeAddress, supersedes, toDecision, type Decision } from '../../identify/consent.ts';
import { jsonEqual } from '../../platform/json-equal.ts';
import { mergeTraits, type TraitState } from '../../identify/trait-merge.ts';
import type { ConsentDecisionInput } from '../../identify/validation.ts';
import { request, type Reply } from '../helpers/http.ts';
import { harnessWithProcesses, spawnTwoGateways, type Child } from '../helpers/processes.ts';
import { newTenant, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let children: Child[];

harnessWithProcesses(test, async (opened, started) => {
  [h, children] = [opened, started];
  await spawnTwoGateways(h.env, children);
});

const BASE = Date.parse('2024-05-01T10:00:00.000Z');
const USERS = 3;

interface Decided {
  channel: 'email' | 'sms';
  status: 'granted' | 'withdrawn' | 'unknown';
  consentedAt: number | null;
}

interface CallSpec {
  gateway: number;
  time: number;
  traits: Record<string, unknown>;
  consent: Decided[];
  /** null: a new messageId; else the index of an earlier call of the same user whose messageId is reused, sent again unchanged or changed. */
  reuse: { of: number; same: boolean } | null;
}

const time = fc.integer({ min: 0, max: 4 }).map((k) => BASE + k * 1000);

function callSpec(user: number): fc.Arbitrary<CallSpec> {
  const traits = fc.record(
    {
      a: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constant(null), fc.constantFrom('x', 'y')),
      b: fc.constantFrom(true, false, { nested: 1 }),
      email: fc.constantFrom(`u${user}-0@example.com`, ` U${user}-1@Example.com `, ''),
      phone: fc.constantFrom(`+1-555-${user}0`, `+1-555-${user}1`),
    },
    { requiredKeys: [] },
  );
  const decision = (channel: 'email' | 'sms') =>
    fc.record({
      channel: fc.constant(channel),
      status: fc.constantFrom('granted', 'withdrawn', 'unknown' as const),
      consentedAt: fc.option(time, { nil: null }),
    });
  const consent = fc
    .tuple(fc.option(decision('email'), { nil: null }), fc.option(decision('sms'), { nil: null }))
    .map((ds) => ds.filter((d): d is Decided => d !== null));
  return fc.record({
    gateway: fc.integer({ min: 0, max: 1 }),
    time,
    traits,
    consent,
    reuse: fc.option(fc.record({ of: fc.nat(), same: fc.boolean() }), { nil: null, freq: 3 }),
  });
}

const histories = fc.tuple(...Array.from({ length: USERS }, (_, u) => fc.array(callSpec(u), { minLength: 1, maxLength: 6 })));

interface Body {
  userId: string;
  messageId: string;
  timestamp: string;
  traits: Record<string, unknown>;
  consent?: ConsentDecisionInput[];
}

/** The bodies a user's client sends, in order. */
function bodiesOf(run: string, user: number, specs: CallSpec[]): { gateway: number; body: Body }[] {
  const out: { gateway: number; body: Body }[] = [];
  specs.forEach((s, i) => {
    let traits = s.traits;
    if (!Object.keys(traits).length && !s.consent.length) traits = { a: 0 };
    let body: Body = { userId: `${run}-u${user}`, messageId: `${run}-u${user}-m${i}`, timestamp: new Date(s.time).toISOString(), traits };
    if (s.reuse && i > 0) {
      const earlier = out[s.reuse.of % i].body;
      body = s.reuse.same ? { ...earlier } : { ...body, messageId: earlier.messageId };
    }
    if (s.consent.length)
      body.consent = s.consent.map(
        (d) => ({ channel: d.channel, status: d.status, ...(d.consentedAt === null ? {} : { consentedAt: d.consentedAt }) }) as never,
      );
    else delete body.consent;
    out.push({ gateway: s.gateway, body });
  });
  return out;
}

/** The rules applied one call after the other: the expected answers, profile and decisions of one user. */
function expected(bodies: Body[], now: number) {
  const messages = new Map<string, Body>();
  let profile: TraitState | null = null;
  const claims: { channel: 'email' | 'sms'; value: string; at: number }[] = [];
  const decisions = new Map<string, Decision>();
  const answers: { status: number; duplicate?: boolean }[] = [];
  for (const body of bodies) {
    const callTime = Date.parse(body.timestamp);
    const prior = messages.get(body.messageId);
    if (prior) {
      const same = prior.userId === body.userId && prior.timestamp === body.timestamp && jsonEqual(prior.traits, body.traits);
      answers.push(same ? { status: 200, duplicate: true } : { status: 409 });
      continue;
    }
    messages.set(body.messageId, body);
    answers.push({ status: 200, duplicate: false });
    const merged = mergeTraits(profile, body.traits, callTime);
    profile = { fields: merged.fields, times: merged.times, updatedAt: merged.updatedAt };
    if (Object.hasOwn(body.traits, 'email')) claims.push({ channel: 'email', value: normalizeAddress('email', body.traits.email) ?? '', at: callTime });
    if (Object.hasOwn(body.traits, 'phone')) claims.push({ channel: 'sms', value: normalizeAddress('sms', body.traits.phone) ?? '', at: callTime });
    for (const raw of body.consent ?? []) {
      const input: ConsentDecisionInput = {
        channel: raw.channel,
        status: raw.status,
        purpose: 'marketing',
        basis: null,
        source: 'api',
        consentedAt: raw.consentedAt ?? null,
        proofRef: null,
        expiresAt: null,
      };
      const d = toDecision(input, callTime, now);
      const address =
        addressFromTraits(d.channel, body.traits) ??
        addressAsOf(
          d.channel,
          claims.filter((c) => c.channel === d.channel),
          d.decidedAt,
        );
      if (!address) continue;
      const key = `${d.channel}:${address}`;
      if (supersedes(d, decisions.get(key) ?? null)) decisions.set(key, d);
    }
  }
  return { answers, profile, decisions };
}

function send(tenant: Tenant, gateway: number, body: Body): Promise<Reply> {
  return request(children[gateway].url, `/api/identify/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
}

test('random histories through two gateways end as the rules applied in arrival order', async (t) => {
  let checked = 0;
  await fc.assert(
    fc.asyncProperty(histories, async (specs) => {
      const tenant = await newTenant(h);
      const run = randomBytes(3).toString('hex');
      const perUser = specs.map((s, u) => bodiesOf(run, u, s));
      // Concurrent clients, one per user, each sending in order.
      const replies = await Promise.all(
        perUser.map(async (calls) => {
          const out: Reply[] = [];
          for (const c of calls) out.push(await send(tenant, c.gateway, c.body));
          return out;
        }),
      );
      const stored = await h.db.consentDecision.findMany({ where: { environmentId: tenant.environmentId } });
      const storedDecisions = new Map(
        stored.map((d) => [
          `${d.channel}:${d.address}`,
          { status: d.status, decidedAt: Number(d.decidedAt), expiresAt: d.expiresAt === null ? null : Number(d.expiresAt) },
        ]),
      );
      const wantDecisions = new Map<string, unknown>();
      for (let u = 0; u < USERS; u++) {
        const bodies = perUser[u].map((c) => c.body);
        const want = expected(bodies, Date.now());
        const got = replies[u].map((r) => (r.status === 200 ? { status: 200, duplicate: r.json.duplicate } : { status: r.status }));
        if (!jsonEqual(got, want.answers))
          throw new Error(`answers of user ${u}: ${JSON.stringify(got)} != ${JSON.stringify(want.answers)}\n${JSON.stringify(bodies)}`);
        const profile = await request(children[u % 2].url, `/api/profiles/${tenant.slug}/${encodeURIComponent(bodies[0].userId)}`, {
          method: 'GET',
          headers: { 'x-api-key': tenant.key },
        });
        const gotProfile = profile.status === 200 ? { fields: profile.json.fields, updatedAt: profile.json.updated_at } : null;
        const wantProfile = want.profile && { fields: want.profile.fields, updatedAt: want.profile.updatedAt };
        if (!jsonEqual(gotProfile, wantProfile))
          throw new Error(`profile of user ${u}: ${JSON.stringify(gotProfile)} != ${JSON.stringify(wantProfile)}\n${JSON.stringify(bodies)}`);
        for (const [key, d] of want.decisions) wantDecisions.set(key, { status: d.status, decidedAt: d.decidedAt, expiresAt: d.expiresAt });
      }
      const sorted = (m: Map<string, unknown>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
      if (!jsonEqual(sorted(storedDecisions), sorted(wantDecisions))) {
        throw new Error(`decisions: ${JSON.stringify(sorted(storedDecisions))} != ${JSON.stringify(sorted(wantDecisions))}\n${JSON.stringify(perUser)}`);
      }
      checked++;
    }),
    { numRuns: Number(process.env.FUZZ_RUNS ?? 15) },
  );
  t.true(checked >= 1, 'histories were checked');
});
