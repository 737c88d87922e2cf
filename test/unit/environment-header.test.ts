import test from 'ava';
import { isValidEnvironmentKey, readEnvironmentHeader } from '../../environments/environment-header.ts';
import type { EnvironmentHeader } from '../../environments/environment-header.ts';

const reads = test.macro({
  exec(t, input: string | string[] | undefined, expected: EnvironmentHeader) {
    t.deepEqual(readEnvironmentHeader(input), expected);
  },
  title: (_p, input: unknown, expected: EnvironmentHeader) => `${JSON.stringify(input) ?? 'absent'} -> ${expected.kind}`,
});

test(reads, undefined, { kind: 'ok', key: 'prod' });
test(reads, 'prod', { kind: 'ok', key: 'prod' });
test(reads, 'staging', { kind: 'ok', key: 'staging' });
test(reads, 'qa-2', { kind: 'ok', key: 'qa-2' });
test(reads, 'a'.repeat(32), { kind: 'ok', key: 'a'.repeat(32) });
test(reads, 'production', { kind: 'production' });
test(reads, '', { kind: 'invalid' });
test(reads, 'Prod', { kind: 'invalid' });
test(reads, 'PRODUCTION', { kind: 'invalid' });
test(reads, 'Production', { kind: 'invalid' });
test(reads, 'a'.repeat(33), { kind: 'invalid' });
test(reads, 'qa_2', { kind: 'invalid' });
test(reads, 'qa 2', { kind: 'invalid' });
test(reads, ' prod', { kind: 'invalid' });
test(reads, 'prod\n', { kind: 'invalid' });
test(reads, ['staging'], { kind: 'invalid' });
test(reads, ['prod', 'staging'], { kind: 'invalid' });

test('isValidEnvironmentKey', (t) => {
  t.true(isValidEnvironmentKey('staging'));
  t.true(isValidEnvironmentKey('-'));
  t.true(isValidEnvironmentKey('a'.repeat(32)));
  t.false(isValidEnvironmentKey('a'.repeat(33)));
  t.false(isValidEnvironmentKey(''));
  t.false(isValidEnvironmentKey('prod'));
  t.false(isValidEnvironmentKey('production'));
  t.false(isValidEnvironmentKey('Staging'));
  t.false(isValidEnvironmentKey('qa_2'));
});
