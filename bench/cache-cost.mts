// node --import tsx bench/cache-cost.mts [entries] — what an entry of the gateway's caches takes
// on the heap (measured: the heap's growth while a cache fills, after full collections) and
// what the cache counts against its budget (platform/heap-size.ts), for each kind of profile of
// test/helpers/heap.ts and for API keys. Each kind is measured in a process of its own, so no
// other kind's garbage counts. One JSON line per kind.
import { execFileSync } from 'node:child_process';
import { hashApiKey } from '../environments/api-key.ts';
import { ProfileCache } from '../identify/profile-cache.ts';
import { KeyCache } from '../gateway/key-cache.ts';
import { exposeGc, heapDelta, keyRecord, PROFILE_SHAPES, profilePlan, type ProfileShape } from '../test/helpers/heap.ts';

const ENTRIES = Number(process.argv[2] ?? 100_000);
const kind = process.argv[3];

function measure(name: string): { kind: string; entries: number; measuredPerEntry: number; countedPerEntry: number; countedOverMeasured: number } {
  const gc = exposeGc();
  let counted = 0;
  const measured = heapDelta(gc, () => {
    if (name === 'key') {
      const cache = new KeyCache(Number.MAX_SAFE_INTEGER);
      for (let j = 0; j < ENTRIES; j++) cache.put(hashApiKey(`itk_${j}`), j % 4 === 0 ? null : keyRecord(j), Date.now());
      const { admitted, refused } = cache.stats();
      counted = admitted.bytes + refused.bytes;
      return cache;
    }
    const cache = new ProfileCache(Number.MAX_SAFE_INTEGER);
    for (let i = 0; i < ENTRIES; i += 64) cache.remember(profilePlan(name as ProfileShape, i, Math.min(64, ENTRIES - i)), String(i));
    counted = cache.bytes;
    return cache;
  });
  const per = (n: number) => Math.round(n / ENTRIES);
  return {
    kind: name,
    entries: ENTRIES,
    measuredPerEntry: per(measured),
    countedPerEntry: per(counted),
    countedOverMeasured: Math.round((counted / measured) * 100) / 100,
  };
}

if (kind) console.log(JSON.stringify(measure(kind)));
else
  for (const name of [...Object.keys(PROFILE_SHAPES), 'key'])
    process.stdout.write(execFileSync(process.execPath, [...process.execArgv, process.argv[1], String(ENTRIES), name], { encoding: 'utf8' }));
