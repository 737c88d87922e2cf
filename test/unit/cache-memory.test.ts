// The caches' budgets are in heap bytes (platform/heap-size.ts): what a cache counts must be what
// it really takes, measured here as the heap's growth while it fills with representative
// entries. It may count a little more (the budget then holds a little less), never less.
import { createHash } from 'node:crypto';
import test from 'ava';
import { hashApiKey } from '../../environments/api-key.ts';
import { stringBytes } from '../../platform/heap-size.ts';
import { ProfileCache } from '../../identify/profile-cache.ts';
import { KeyCache } from '../../gateway/key-cache.ts';
import { exposeGc, heapDelta, keyRecord, PROFILE_SHAPES, profilePlan, type ProfileShape } from '../helpers/heap.ts';

const gc = exposeGc();
/** Counted over measured: at least 0.97 (a little noise), at most 1.35 (budget not wasted). */
const LOW = 0.97;
const HIGH = 1.35;

// Measured one at a time: ava runs a file's tests concurrently, and another test's garbage would count.
test.before(() => gc());

for (const shape of Object.keys(PROFILE_SHAPES) as ProfileShape[]) {
  test.serial(`profile cache (${shape} profiles): counts what its entries take on the heap`, (t) => {
    const n = 64 * 320;
    let cache: ProfileCache | undefined;
    const measured = heapDelta(gc, () => {
      cache = new ProfileCache(Number.MAX_SAFE_INTEGER);
      for (let i = 0; i < n; i += 64) cache.remember(profilePlan(shape, i, 64), String(1000 + i));
      return cache;
    });
    const ratio = cache!.bytes / measured;
    t.log(`${shape}: ${Math.round(measured / cache!.size)} bytes measured per profile, ${Math.round(cache!.bytes / cache!.size)} counted`);
    t.is(cache!.size, n);
    t.true(ratio >= LOW && ratio <= HIGH, `counted / measured = ${ratio.toFixed(2)}`);
  });
}

// The gateway's cache spends most of its life full and evicting: a profile's users leave with
// it, and its Maps hold tables where entries are deleted and added all the time (V8 rebuilds a
// table once its slots are used up, twice as large only when most of them are live). Four
// times its budget written through it (profiles of about 1 KB), it still holds what it counts.
test.serial('profile cache: after evicting three times its budget, holds what it counts and no more than its budget', (t) => {
  const budget = 16 * 1_048_576;
  let cache: ProfileCache | undefined;
  let written = 0;
  const measured = heapDelta(gc, () => {
    cache = new ProfileCache(budget);
    for (; written < (4 * budget) / 1024; written += 64) cache.remember(profilePlan('small', written, 64), String(1000 + written));
    return cache;
  });
  const ratio = cache!.bytes / measured;
  t.log(
    `${written} written, ${cache!.size} held: ${Math.round(measured / cache!.size)} bytes measured per profile, ${Math.round(cache!.bytes / cache!.size)} counted`,
  );
  t.true(cache!.bytes <= budget);
  t.true(cache!.size < written / 3, 'it evicted');
  t.true(ratio >= LOW && ratio <= HIGH, `counted / measured = ${ratio.toFixed(2)}`);
});

test.serial('key cache: counts what valid and refused keys take on the heap', (t) => {
  const n = 20_000;
  let cache: KeyCache | undefined;
  const measured = heapDelta(gc, () => {
    cache = new KeyCache(Number.MAX_SAFE_INTEGER);
    for (let j = 0; j < n; j++) cache.put(hashApiKey(`itk_${j}`), j % 4 === 0 ? null : keyRecord(j, j % 4 === 1 ? 'revoked' : 'active'), Date.now());
    return cache;
  });
  const { admitted, refused } = cache!.stats();
  const ratio = (admitted.bytes + refused.bytes) / measured;
  t.log(`${Math.round(measured / n)} bytes measured per key, ${Math.round((admitted.bytes + refused.bytes) / n)} counted`);
  t.is(admitted.size + refused.size, n);
  t.true(ratio >= LOW && ratio <= HIGH, `counted / measured = ${ratio.toFixed(2)}`);
});

test('a string costs its flat form, whatever built it (a concatenation is flattened by being measured)', (t) => {
  t.is(stringBytes(''), 16);
  t.is(stringBytes('abcdefgh'), 24);
  t.is(stringBytes('abcdefghi'), 32, 'rounded up to 8 bytes');
  t.is(stringBytes('東京'), 24, 'two bytes a character outside ASCII');
  t.is(stringBytes(createHash('sha256').digest('hex')), 80);
});
