import test from 'ava';
import { joinableEmail } from '../../common/domain/email.ts';

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
