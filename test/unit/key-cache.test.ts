// The key cache's memory (gateway/key-cache.ts) and the eviction rule it shares with the profile
// cache (platform/lru.ts): a byte budget, least recently used first, and keys that let no request
// in kept apart from those that do.
import test from 'ava';
import { hashApiKey } from '../../environments/api-key.ts';
import { Lru } from '../../platform/lru.ts';
import { KeyCache, keyEntryBytes, REFUSED_SHARE } from '../../gateway/key-cache.ts';
import { keyRecord } from '../helpers/heap.ts';

const sized = (bytes: number) => ({ bytes });

test('Lru: evicts the least recently used until the budget holds; get refreshes, peek does not; resize counts', (t) => {
  const evicted: string[] = [];
  const lru = new Lru<string, { bytes: number }>(100, (key) => evicted.push(key));
  for (const key of ['a', 'b', 'c']) lru.set(key, sized(30));
  lru.get('a');
  lru.peek('b');
  lru.set('d', sized(30));
  lru.trim();
  t.deepEqual(evicted, ['b']);
  t.is(lru.bytes, 90);
  const c = lru.peek('c')!;
  lru.resize(c, 50);
  lru.trim();
  t.deepEqual(evicted, ['b', 'c'], 'grown past the budget: the oldest goes (here the grown one)');
  t.is(lru.bytes, 60);
  lru.set('a', sized(10));
  t.is(lru.bytes, 40, 'replacing counts the new size only');
  t.is(lru.delete('a')!.bytes, 10);
  t.deepEqual(evicted, ['b', 'c'], 'a deletion is not an eviction');
  lru.clear();
  t.is(lru.size, 0);
  t.is(lru.bytes, 0);
});

test('a flood of unknown keys evicts only unknown keys: every valid key stays, and the unknown ones stay within their share', (t) => {
  const budget = 200_000;
  const cache = new KeyCache(budget);
  const valid = Array.from({ length: 100 }, (_, j) => hashApiKey(`itk_valid_${j}`));
  valid.forEach((hash, j) => cache.put(hash, keyRecord(j), 1));
  for (let j = 0; j < 20_000; j++) cache.put(hashApiKey(`itk_guess_${j}`), null, 2);
  for (const hash of valid) t.is(cache.get(hash)?.record?.status, 'active');
  const { admitted, refused } = cache.stats();
  t.is(admitted.size, 100);
  t.true(refused.bytes <= budget * REFUSED_SHARE);
  t.true(refused.size > 100, `${refused.size} unknown keys remembered`);
  t.is(cache.get(hashApiKey('itk_guess_0')), undefined, 'the oldest guesses went');
  t.not(cache.get(hashApiKey('itk_guess_19999')), undefined);
});

test('valid keys evict only valid keys, least recently used first; a key revoked moves to the refused side', (t) => {
  const one = keyEntryBytes(hashApiKey('itk_x'), keyRecord(1));
  // Room for three valid keys (a quarter of the budget is the refused side's).
  const cache = new KeyCache(Math.floor((3.5 * one) / (1 - REFUSED_SHARE)));
  const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((k) => hashApiKey(`itk_${k}`));
  for (const hash of [a, b, c]) cache.put(hash, keyRecord(1), 1);
  cache.get(a);
  cache.put(d, keyRecord(1), 1);
  t.is(cache.get(b), undefined, 'b, the least recently used');
  for (const hash of [a, c, d]) t.not(cache.get(hash), undefined);
  cache.put(a, keyRecord(1, 'revoked'), 2);
  t.is(cache.get(a)?.record?.status, 'revoked');
  t.deepEqual([cache.stats().admitted.size, cache.stats().refused.size], [2, 1]);
  cache.clear();
  t.deepEqual(cache.stats(), { admitted: { size: 0, bytes: 0 }, refused: { size: 0, bytes: 0 } });
});
