// The chaos run's seeded parts: the generator of randomness, the plan a seed gives, the CI
// seeds' coverage of every fault and scenario, the command line, and the reading of pipelined
// answers (chaos/).
import test from 'ava';
import { parseChaosArgs } from '../../chaos/args.ts';
import { CI_MINUTES, CI_SEEDS, makePlan, STEP_KINDS } from '../../chaos/plan.ts';
import { createRng } from '../../chaos/prng.ts';
import { parseAnswers } from '../../chaos/raw-http.ts';
import { pipelineWrite, PIPELINE_VARIANTS } from '../../chaos/bodies.ts';

test('the same seed gives the same numbers; forks are independent of each other and of their parent', (t) => {
  const draw = (seed: number) => Array.from({ length: 5 }, createRng(seed).next);
  t.deepEqual(draw(42), draw(42));
  t.notDeepEqual(draw(42), draw(43));
  const root = createRng(7);
  const a = root.fork('client-0');
  const first = a.next();
  root.next();
  root.fork('client-1').next();
  t.is(createRng(7).fork('client-0').next(), first, 'drawing from a parent or a sibling does not move a fork');
  for (let i = 0; i < 1000; i++) {
    const x = root.next();
    t.true(x >= 0 && x < 1);
  }
});

test('weighted draws follow their weights', (t) => {
  const rng = createRng(1);
  const counts = { a: 0, b: 0 };
  for (let i = 0; i < 10_000; i++) counts[rng.weighted({ a: 3, b: 1 })]++;
  t.true(counts.a > 7_000 && counts.a < 8_000, JSON.stringify(counts));
});

test('a plan is a function of its seed and length', (t) => {
  t.deepEqual(makePlan(5, 2), makePlan(5, 2));
  t.notDeepEqual(makePlan(5, 2).steps, makePlan(6, 2).steps);
  const long = makePlan(5, 30);
  t.true(long.steps.length >= 100);
  t.deepEqual([...new Set(long.steps.map((s) => s.kind))].sort(), [...STEP_KINDS].sort(), 'a long run stages every kind');
  for (const s of long.steps) t.true(s.joinRate >= 100 && s.joinRate <= 200 && s.eraseAfterMs >= 1_000 && s.eraseAfterMs <= 3_000);
});

test('--ci: its seeds stage every fault and scenario between them', (t) => {
  const staged = new Set(CI_SEEDS.flatMap((seed) => makePlan(seed, CI_MINUTES).steps.map((s) => s.kind)));
  t.deepEqual(
    [...STEP_KINDS].filter((k) => !staged.has(k)),
    [],
  );
});

test('the command line', (t) => {
  t.deepEqual(parseChaosArgs(['--seed', '42', '--minutes', '3']), { seeds: [42], minutes: 3, keep: false });
  t.deepEqual(parseChaosArgs(['--ci']), { seeds: [...CI_SEEDS], minutes: CI_MINUTES, keep: false });
  t.true('error' in parseChaosArgs(['--ci', '--seed', '1']));
  t.true('error' in parseChaosArgs(['--seed', '-1']));
  t.true('error' in parseChaosArgs(['--minutes']));
  t.true('error' in parseChaosArgs(['--what']));
  const random = parseChaosArgs([]);
  t.true('seeds' in random && random.seeds.length === 1 && random.minutes === 1);
});

test('pipelined answers are read in order; a torn one is left over', (t) => {
  const first = 'HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"a":"1234"}';
  const chunked = 'HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\n{"e":\r\n3\r\n"x"\r\n1\r\n}\r\n0\r\n\r\n';
  const { answers, trailing } = parseAnswers(first + chunked + 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{"a');
  t.deepEqual(
    answers.map((a) => [a.status, a.body, a.headers.connection]),
    [
      [202, '{"a":"1234"}', undefined],
      [400, '{"e":"x"}', 'close'],
    ],
  );
  t.true(trailing.startsWith('HTTP/1.1 200 OK'));
  t.deepEqual(parseAnswers(''), { answers: [], trailing: '' });
});

test('a pipelined write: a valid request first, each request with IDs of its own', (t) => {
  const rng = createRng(3);
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const w = pipelineWrite(rng, 'acme', 'itk_x', Date.UTC(2026, 0, 1), (j) => ({ messageId: `m${i}-${j}`, userId: `u${i}-${j}` }));
    seen.add(w.variant);
    t.is(w.parts[0].role, 'valid');
    t.is(w.bytes.split('\r\n')[0].startsWith('POST /api/'), true);
    if (w.variant === 'expect')
      t.deepEqual(
        w.parts.map((p) => p.role),
        ['valid', 'refused', 'behind'],
      );
  }
  t.deepEqual([...seen].sort(), [...PIPELINE_VARIANTS].sort());
});
