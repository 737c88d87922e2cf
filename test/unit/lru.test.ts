// The gateway caches' eviction order: any sequence of uses, additions and deletions evicts
// exactly what a plain least-recently-used list would, including when the newest entry is used
// again (which moves nothing).
import test from 'ava';
import fc from 'fast-check';
import { Lru } from '../../platform/lru.ts';

const op = fc.oneof(
  fc.record({ get: fc.constantFrom('a', 'b', 'c', 'd') }),
  fc.record({ set: fc.constantFrom('a', 'b', 'c', 'd') }),
  fc.record({ delete: fc.constantFrom('a', 'b', 'c', 'd') }),
);

test('evicts in least-recently-used order, whatever the sequence', (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 3 }), fc.array(op, { minLength: 10, maxLength: 80 }), (budget, ops) => {
      const evicted: string[] = [];
      const lru = new Lru<string, { bytes: number }>(budget, (key) => evicted.push(key));
      // The model: keys from least to most recently used.
      let order: string[] = [];
      const expectedEvicted: string[] = [];
      for (const o of ops) {
        if ('get' in o) {
          const hit = lru.get(o.get) !== undefined;
          if (hit !== order.includes(o.get)) return false;
          if (hit) order = [...order.filter((k) => k !== o.get), o.get];
        } else if ('set' in o) {
          lru.set(o.set, { bytes: 1 });
          lru.trim();
          order = [...order.filter((k) => k !== o.set), o.set];
          while (order.length > budget) expectedEvicted.push(order.shift()!);
        } else {
          lru.delete(o.delete);
          order = order.filter((k) => k !== o.delete);
        }
        if (lru.size !== order.length) return false;
      }
      return JSON.stringify(evicted) === JSON.stringify(expectedEvicted);
    }),
    { numRuns: 1000 },
  );
  t.pass();
});
