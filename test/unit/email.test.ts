import test from 'ava';
import { joinableEmail, joinTarget } from '../../identify/email.ts';

const joins = test.macro((t, value: unknown, expected: string | null) => t.is(joinableEmail(value), expected));

test('a real address, normalized', joins, '  Ann@Example.COM ', 'ann@example.com');
test('subdomains', joins, 'a.b+c@mail.co.uk', 'a.b+c@mail.co.uk');
test('placeholder unknown', joins, 'unknown', null);
test('placeholder N/A', joins, 'N/A', null);
test('empty', joins, '', null);
test('blank', joins, '   ', null);
test('no domain dot', joins, 'ann@localhost', null);
test('no at', joins, 'ann.example.com', null);
test('two ats', joins, 'a@b@c.com', null);
test('spaces inside', joins, 'ann smith@example.com', null);
test('placeholder local part', joins, 'unknown@example.com', null);
test('no-reply mailbox', joins, 'noreply@shop.com', null);
test('not a string', joins, 42, null);
test('null', joins, null, null);

test('a joinable email joins the oldest other profile of its environment holding it; on equal times the lower id', (t) => {
  const p = (id: string, envId: string, email: string | null, createdAt: number) => ({ id, envId, email, createdAt });
  const profiles = [p('c', 'e1', 'a@b.io', 5), p('b', 'e1', 'a@b.io', 3), p('a', 'e1', 'a@b.io', 3), p('z', 'e2', 'a@b.io', 1), p('y', 'e1', 'x@b.io', 1)];
  t.is(joinTarget(profiles, 'e1', 'a@b.io', null)?.id, 'a');
  t.is(joinTarget(profiles, 'e1', 'a@b.io', 'a')?.id, 'b', 'never the profile itself');
  t.is(joinTarget(profiles, 'e2', 'a@b.io', 'z'), null);
  t.is(joinTarget(profiles, 'e3', 'a@b.io', null), null, 'only within the environment');
});
