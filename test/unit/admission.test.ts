import test from 'ava';
import fc from 'fast-check';
import { createAdmission, fairToTake, type Admission, type AdmissionBounds, type UploadSlot } from '../../gateway/admission.ts';
import { ApiError } from '../../gateway/errors.ts';
import { checkChain } from '../../gateway/checks/chain.ts';

const ctxOf = (id: string) => ({ state: { environment: { id } } }) as never;
/** The admission's in-flight slot as a route's chain holds it: taken by a step, given back once the steps after it end. */
const inFlightWhile = (admission: Admission, id: string, rest: () => Promise<void>) =>
  checkChain([admission.takeInFlight, rest], admission.leaveInFlight)(ctxOf(id), async () => {});

/** An upload as the body reader makes one; `reclaimed` counts the admission's calls. */
function slot(): UploadSlot & { reclaimed: number } {
  return {
    holder: null,
    place: -1,
    reclaimed: 0,
    reclaim() {
      this.reclaimed++;
    },
  };
}

function uploadsOf(bounds: Pick<AdmissionBounds, 'uploads' | 'uploadsPerEnvironment'>): Admission {
  return createAdmission({ inFlight: 1, inFlightPerEnvironment: 1, ...bounds });
}

test('fair to take: while more slots are free than the environment holds', (t) => {
  t.true(fairToTake(0, 9, 10));
  t.false(fairToTake(0, 10, 10));
  t.true(fairToTake(4, 5, 10));
  t.false(fairToTake(5, 5, 10));
  // Alone, an environment may hold half of a total; k environments that take all they can, 1/(k+1) each.
  for (const k of [1, 2, 3, 9]) {
    const held = Array.from({ length: k }, () => 0);
    for (let again = true; again;) {
      again = false;
      for (let i = 0; i < k; i++)
        if (
          fairToTake(
            held[i],
            held.reduce((x, y) => x + y),
            100,
          )
        ) {
          held[i]++;
          again = true;
        }
    }
    const total = held.reduce((x, y) => x + y);
    t.true(
      held.every((x) => Math.abs(x - 100 / (k + 1)) <= 1),
      `${k}: ${held.join(', ')}`,
    );
    // What stays free is at most one short of the most any holds.
    t.true(100 - total >= Math.max(...held) - 1, `${k}: ${100 - total} free`);
  }
});

test('uploads: an environment past its part is refused alone (429, the connection closed); another is admitted', (t) => {
  const admission = uploadsOf({ uploads: 10, uploadsPerEnvironment: 2 });
  const held = [slot(), slot()];
  for (const s of held) admission.beginUpload('a', s);
  const refused = t.throws(() => admission.beginUpload('a', slot()), { instanceOf: ApiError });
  t.is(refused?.status, 429);
  t.deepEqual(refused?.headers, { 'Retry-After': '1', Connection: 'close' });
  admission.beginUpload('b', slot());
  t.is(admission.uploadCount(), 3);
  t.is(admission.refusals('uploads_environment'), 1);
  admission.endUpload(held[0]);
  admission.beginUpload('a', slot());
  t.is(admission.uploadCount(), 3);
});

test('uploads: shares adapt to the environments taking; one that holds fewer takes an upload back from the one holding the most', (t) => {
  const admission = uploadsOf({ uploads: 4, uploadsPerEnvironment: 4 });
  const a = [slot(), slot()];
  // a alone: half of the total, the rest free for others.
  for (const s of a) admission.beginUpload('a', s);
  t.throws(() => admission.beginUpload('a', slot()), { instanceOf: ApiError });
  t.is(admission.refusals('uploads_environment'), 1);
  const b = slot();
  admission.beginUpload('b', b);
  t.throws(() => admission.beginUpload('b', slot()), { instanceOf: ApiError }, 'b holds as many as are free');
  const c = slot();
  admission.beginUpload('c', c);
  t.is(admission.uploadCount(), 4, 'full');
  // d holds none, a holds two: one of a's is taken back and given to d.
  const d = slot();
  admission.beginUpload('d', d);
  t.is(a[0].reclaimed + a[1].reclaimed, 1, "one of a's uploads taken back");
  const [taken] = a.filter((s) => s.reclaimed);
  t.is(taken.holder, null);
  t.is(d.holder?.id, 'd');
  t.is(admission.uploadCount(), 4);
  t.is(admission.refusals('uploads_environment'), 3, 'the upload taken back counts as a refusal of a');
  // Now everyone holds one: nothing to take back, and the total refuses e.
  t.throws(() => admission.beginUpload('e', slot()), { instanceOf: ApiError });
  t.is(admission.refusals('uploads'), 1);
  // The reader of the upload taken back gives it back too: nothing happens.
  admission.endUpload(taken);
  t.is(admission.uploadCount(), 4);
  for (const s of [...a.filter((x) => !x.reclaimed), b, c, d]) admission.endUpload(s);
  t.is(admission.uploadCount(), 0);
  admission.prune();
  // Pruned and empty: a alone gets half again.
  admission.beginUpload('a', slot());
  admission.beginUpload('a', slot());
  t.throws(() => admission.beginUpload('a', slot()), { instanceOf: ApiError });
});

test('in flight: held while the chain runs, refused past the part, the fair share or the total (the body was read: the connection stays)', async (t) => {
  const admission = createAdmission({ inFlight: 4, inFlightPerEnvironment: 3, uploads: 1, uploadsPerEnvironment: 1 });
  const releases: (() => void)[] = [];
  const hold = (id: string) => inFlightWhile(admission, id, () => new Promise<void>((resolve) => releases.push(resolve)));
  // a alone: half of the total.
  const held = [hold('a'), hold('a')];
  const refusal = await t.throwsAsync(hold('a'), { instanceOf: ApiError });
  t.is(refusal?.status, 429);
  t.deepEqual(refusal?.headers, { 'Retry-After': '1' });
  held.push(hold('b'));
  await t.throwsAsync(hold('b'), { instanceOf: ApiError });
  held.push(hold('c'));
  t.is(admission.inFlightCount(), 4);
  await t.throwsAsync(hold('d'), { instanceOf: ApiError });
  t.is(admission.refusals('in_flight_environment'), 2);
  t.is(admission.refusals('in_flight'), 1);
  // Pruning keeps the environments that hold slots.
  admission.prune();
  for (const release of releases) release();
  await Promise.all(held);
  t.is(admission.inFlightCount(), 0);
  admission.prune();
  await inFlightWhile(admission, 'a', async () => {});
  t.is(admission.inFlightCount(), 0);
});

test('in flight: the part binds below the fair share', async (t) => {
  const admission = createAdmission({ inFlight: 10, inFlightPerEnvironment: 2, uploads: 1, uploadsPerEnvironment: 1 });
  const releases: (() => void)[] = [];
  const hold = (id: string) => inFlightWhile(admission, id, () => new Promise<void>((resolve) => releases.push(resolve)));
  const held = [hold('a'), hold('a')];
  await t.throwsAsync(hold('a'), { instanceOf: ApiError });
  t.is(admission.refusals('in_flight_environment'), 1);
  for (const release of releases) release();
  await Promise.all(held);
});

// Any sequence of uploads begun and ended, against the rule written out plainly: the part, then
// "while more are free than it holds", then taking back from a largest holder that holds at least
// two more; the counts always agree and never pass the bounds.
test('uploads: any sequence follows the rule', (t) => {
  const op = fc.oneof(fc.record({ begin: fc.integer({ min: 0, max: 5 }) }), fc.record({ end: fc.nat() }));
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 12 }), fc.array(op, { maxLength: 200 }), (total, part, ops) => {
      const admission = uploadsOf({ uploads: total, uploadsPerEnvironment: part });
      const model = new Map<string, ReturnType<typeof slot>[]>();
      const count = (env: string) => model.get(env)?.length ?? 0;
      const sum = () => [...model.values()].reduce((n, list) => n + list.length, 0);
      for (const [i, o] of ops.entries()) {
        if ('end' in o) {
          const all = [...model.values()].flat();
          if (all.length === 0) continue;
          const s = all[o.end % all.length];
          const list = model.get(s.holder!.id)!;
          admission.endUpload(s);
          list.splice(list.indexOf(s), 1);
          // Again (a reader that ends twice) changes nothing.
          admission.endUpload(s);
          t.is(s.holder, null);
        } else {
          const env = `e${o.begin}`;
          const held = count(env);
          const most = Math.max(0, ...[...model.values()].map((list) => list.length));
          const s = slot();
          const before = [...model.values()].flat();
          const admitted = (() => {
            try {
              admission.beginUpload(env, s);
              return true;
            } catch {
              return false;
            }
          })();
          const reclaimed = before.filter((x) => x.reclaimed > 0);
          if (held >= part || (held >= total - sum() && most < held + 2)) {
            t.false(admitted);
            t.is(reclaimed.length, 0);
            continue;
          }
          t.true(admitted);
          if (held < total - sum()) t.is(reclaimed.length, 0);
          else {
            t.is(reclaimed.length, 1);
            const [taken] = reclaimed;
            const from = [...model.entries()].find(([, list]) => list.includes(taken))!;
            t.is(from[1].length, most, 'taken back from a largest holder');
            t.is(taken.holder, null);
            from[1].splice(from[1].indexOf(taken), 1);
          }
          if (!model.has(env)) model.set(env, []);
          model.get(env)!.push(s);
          t.is(s.holder?.id, env);
        }
        t.is(admission.uploadCount(), sum());
        t.true(sum() <= total);
        for (const list of model.values()) t.true(list.length <= part);
        if (i % 17 === 0) admission.prune();
      }
    }),
  );
});
