import test from 'ava';
import { isValidOrgSlug, isValidPathValue } from '../../environments/org-slug.ts';

const both = test.macro({
  exec(t, input: string, pathValue: boolean, orgSlug: boolean) {
    t.is(isValidPathValue(input), pathValue, 'isValidPathValue');
    t.is(isValidOrgSlug(input), orgSlug, 'isValidOrgSlug');
  },
  title: (_p, input: string, pathValue: boolean, orgSlug: boolean) =>
    `${JSON.stringify(input.length > 20 ? `${input.slice(0, 8)}…(${input.length})` : input)}: path ${pathValue}, slug ${orgSlug}`,
});

test(both, 'acme', true, true);
test(both, 'a', true, true);
test(both, '7', true, true);
test(both, 'acme-corp-2', true, true);
test(both, 'a--b', true, true);
test(both, 'acme_staging', true, false);
test(both, 'a_-_b', true, false);
test(both, 'a'.repeat(63), true, true);
test(both, 'a'.repeat(64), false, false);
test(both, `a${'_'.repeat(61)}b`, true, false);
test(both, '', false, false);
test(both, 'Acme', false, false);
test(both, 'acmE', false, false);
test(both, '-acme', false, false);
test(both, 'acme-', false, false);
test(both, '_acme', false, false);
test(both, 'acme_', false, false);
test(both, '-', false, false);
test(both, '_', false, false);
test(both, 'acme corp', false, false);
test(both, 'acme.corp', false, false);
test(both, 'acme\n', false, false);
test(both, 'café', false, false);
