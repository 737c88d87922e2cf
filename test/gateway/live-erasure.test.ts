// intake users forget while two gateways still hold the person's calls for the live view: each
// gateway writes its Identify calls and refused calls once a second, so an erasure that ran in
// between would find nothing, and the gateways' next writes would bring the raw user ID back
// (for an hour, for a day). Every gateway writes what it holds before the erasure looks.
import test from 'ava';
import { usersForget } from '../../cli/commands/users.ts';
import { identifyCallsKey, refusedCallsKey } from '../../platform/live-keys.ts';
import { createRedis, type Redis } from '../../platform/redis.ts';
import { liveFlushChannels } from '../../platform/queue-keys.ts';
import { flushOnErasure } from '../../gateway/live/flush-on-erasure.ts';
import { sleep } from '../helpers/eventually.ts';
import { appliedIdentify, request } from '../helpers/http.ts';
import { capturedLogger, gatewayInProcess, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness } from '../helpers/services.ts';

let h: Harness;
let redis: Redis;
let gateways: InProcessGateway[] = [];

test.before(async () => {
  h = await openHarness({ REFUSED_CALLS_PER_SECOND: '1000' });
  redis = createRedis(h.config, 'worker');
  gateways = [await gatewayInProcess(h), await gatewayInProcess(h)];
});

test.after.always(async () => {
  for (const gateway of gateways) await gateway.close();
  redis?.disconnect();
  await h?.close();
});

test.serial('an erasure right after the calls leaves no raw user ID in the live view or the refused calls, on any gateway', async (t) => {
  const tenant = await newTenant(h);
  const liveUsers = async () =>
    (await redis.xrange(identifyCallsKey(h.config.queuePrefix, tenant.environmentId), '-', '+')).map(([, f]) => f[f.indexOf('u') + 1]);
  const refusedBodies = async () => (await redis.lrange(refusedCallsKey(h.config.queuePrefix, tenant.environmentId), 0, -1)).join('\n');

  for (const [i, gateway] of gateways.entries()) {
    await appliedIdentify(gateway.url, tenant, { userId: 'zoe', messageId: `zoe-${i}`, traits: { plan: 'pro' } });
    await appliedIdentify(gateway.url, tenant, { userId: `bystander-${i}`, traits: { plan: 'pro' } });
    const refused = await request(gateway.url, `/api/identify/${tenant.slug}`, {
      headers: { 'x-api-key': tenant.key },
      body: { type: 'identify', userId: 'zoe', traits: 'not an object' },
    });
    t.is(refused.status, 400, refused.text);
  }
  // At once: the gateways' once-a-second writes have most likely not run yet.
  const summary = await usersForget(h.operator, [tenant.slug, 'zoe']);
  t.is(summary.liveViewEntries, 4);

  // Two writes' time: whatever a gateway still held would be in Redis by now.
  await sleep(2500);
  const users = await liveUsers();
  t.false(users.includes('zoe'), users.join(','));
  t.deepEqual(users.sort(), ['bystander-0', 'bystander-1']);
  t.false((await refusedBodies()).includes('zoe'));
});

test.serial('a gateway that cannot write what it holds makes the erasure say its live view part is not done', async (t) => {
  const tenant = await newTenant(h);
  const subscriber = createRedis(h.config, 'worker');
  const { log, records } = capturedLogger();
  // A third gateway whose writes fail (its Redis full, say).
  flushOnErasure({ subscriber, publisher: redis, channels: liveFlushChannels(h.config), flush: () => Promise.reject(new Error('OOM')), log });
  await sleep(200);
  try {
    t.regex((await h.operator.flushLiveViews()) ?? '', /^1 of 3 gateways did not confirm within 3 s$/);
    const summary = await usersForget(h.operator, [tenant.slug, 'zoe']);
    t.is(summary.liveViewEntries, null);
    t.like(summary, { removed: { profiles: 0 } });
    t.true(records.some((r) => r.err === 'OOM'));
  } finally {
    subscriber.disconnect();
  }
});
