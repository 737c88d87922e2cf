// The request log names what refused a request: a 4xx line carries `refusal` (the error, and for
// an Identify call its first issue's path and message), never a value the caller sent; an
// accepted request's line has none.
import test from 'ava';
import { request, trackBody } from '../helpers/http.ts';
import { capturedLogger, gatewayInProcess } from '../helpers/processes.ts';
import { newTenant, openHarness } from '../helpers/services.ts';
import { eventually } from '../helpers/eventually.ts';
import { JsonText } from '../../platform/json-text.ts';
import { forbidden, identifyInvalid } from '../../gateway/errors.ts';
import { refusalOf } from '../../gateway/middleware/respond-errors.ts';

test('a 4xx line names the check that refused it; a 2xx line names none', async (t) => {
  const h = await openHarness();
  t.teardown(() => h.close());
  const { log, records } = capturedLogger();
  const gateway = await gatewayInProcess(h, { log });
  t.teardown(() => gateway.close());
  const tenant = await newTenant(h);
  const key = { 'x-api-key': tenant.key };
  const secret = 'secret-value-7f3a';

  const answers = [
    await request(gateway.url, `/api/track/${tenant.slug}`, { headers: key, body: trackBody() }),
    await request(gateway.url, `/api/track/${tenant.slug}`, { headers: key, body: trackBody({ event: 'profile_fields_changed', userId: secret }) }),
    await request(gateway.url, `/api/track/${tenant.slug}`, { body: trackBody() }),
    await request(gateway.url, `/api/identify/${tenant.slug}`, {
      headers: key,
      body: { type: 'identify', messageId: 'm-1', userId: secret, traits: 7, timestamp: new Date().toISOString() },
    }),
  ];
  t.deepEqual(
    answers.map((a) => a.status),
    [202, 400, 401, 400],
  );
  const lineOf = (requestId: string) => records.find((r) => r.requestId === requestId && 'status' in r);
  const ids = answers.map((a) => a.headers.get('x-request-id')!);
  t.true(await eventually(async () => ids.every((id) => lineOf(id) !== undefined)), 'every request has its line');
  const [accepted, reserved, unauthenticated, identify] = ids.map((id) => lineOf(id)!);
  t.false('refusal' in accepted);
  t.is(reserved.refusal, 'Reserved event name');
  t.is(unauthenticated.refusal, 'Missing API key');
  t.regex(String(identify.refusal), /^Invalid Identify call: traits: \S/);
  t.false(JSON.stringify(records).includes(secret), 'no value the caller sent is logged');
});

test("refusalOf: the error, with an Identify call's first issue given as objects or beside its JSON text", (t) => {
  const issues = [
    { code: 'invalid_type', expected: 'object', received: 'number', path: ['traits', 'a"]b', 3], message: 'Expected "object"' },
    { code: 'x', path: [], message: 'y' },
  ];
  t.is(refusalOf(identifyInvalid(issues)), 'Invalid Identify call: traits.a"]b.3: Expected "object"');
  t.is(refusalOf(identifyInvalid(new JsonText(JSON.stringify(issues)), issues[0])), 'Invalid Identify call: traits.a"]b.3: Expected "object"');
  t.is(refusalOf(identifyInvalid([{ code: 'c', path: [], message: 'Required' }])), 'Invalid Identify call: Required');
  t.is(refusalOf(identifyInvalid(new JsonText('[]'))), 'Invalid Identify call', 'no first issue: the error alone');
  t.is(refusalOf(forbidden()), 'Forbidden');
});
