import test from 'ava';
import { createAdmission } from '../../gateway/admission.ts';
import { ApiError } from '../../gateway/errors.ts';

const bounds = { inFlight: 5, inFlightPerEnvironment: 3, uploads: 4, uploadsPerEnvironment: 2 };
const ctxOf = (id: string) => ({ state: { environment: { id } } }) as never;

test('uploads: an environment past its part is refused alone; the total refuses everyone; released slots are taken again', (t) => {
  const admission = createAdmission(bounds);
  admission.beginUpload('a');
  admission.beginUpload('a');
  const refused = t.throws(() => admission.beginUpload('a'), { instanceOf: ApiError });
  t.is(refused?.status, 429);
  t.deepEqual(refused?.headers, { 'Retry-After': '1', Connection: 'close' });
  admission.beginUpload('b');
  admission.beginUpload('b');
  t.is(admission.uploadCount(), 4);
  t.throws(() => admission.beginUpload('c'), { instanceOf: ApiError });
  t.is(admission.refusals('uploads_environment'), 1);
  t.is(admission.refusals('uploads'), 1);
  admission.endUpload('a');
  admission.beginUpload('c');
  t.is(admission.uploadCount(), 4);
});

test('in flight: held while the chain runs, refused past the part or the total (the body was read: the connection stays)', async (t) => {
  const admission = createAdmission(bounds);
  const releases: (() => void)[] = [];
  const hold = (id: string) => admission.inFlight(ctxOf(id), () => new Promise<void>((resolve) => releases.push(resolve)));
  const held = [hold('a'), hold('a'), hold('a')];
  const refusal = await t.throwsAsync(hold('a'), { instanceOf: ApiError });
  t.deepEqual(refusal?.headers, { 'Retry-After': '1' });
  held.push(hold('b'), hold('b'));
  t.is(admission.inFlightCount(), 5);
  await t.throwsAsync(hold('c'), { instanceOf: ApiError });
  t.is(admission.refusals('in_flight_environment'), 1);
  t.is(admission.refusals('in_flight'), 1);
  // Pruning keeps the environments that hold slots.
  admission.prune();
  for (const release of releases) release();
  await Promise.all(held);
  t.is(admission.inFlightCount(), 0);
  admission.prune();
  await admission.inFlight(ctxOf('a'), async () => {});
  t.is(admission.inFlightCount(), 0);
});
