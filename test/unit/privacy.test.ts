import test from 'ava';
import { createHmac } from 'node:crypto';
import { auditUserHash, decisionsToRemove, dropReason, operatorName, userKeyBits } from '../../privacy/rules.ts';
import { identityHash } from '../../platform/identity-hash.ts';
import { userHashOf } from '../../profiles/person.ts';

test('a user ID is keyed trimmed, as Identify stores it (the key of profile_users)', (t) => {
  t.deepEqual(userHashOf('  alice \t'), identityHash('alice'));
  t.notDeepEqual(userHashOf('alice'), userHashOf('Alice'));
  t.is(userHashOf('x\0y').length, 32);
});

test('the audit hash is HMAC-SHA256 of the user key under the secret: another secret, another hash; the plain key is not it', (t) => {
  const secret = Buffer.alloc(32, 7);
  const key = userHashOf('alice');
  t.deepEqual(auditUserHash(secret, key), createHmac('sha256', secret).update(key).digest());
  t.notDeepEqual(auditUserHash(secret, key), key);
  t.notDeepEqual(auditUserHash(Buffer.alloc(32, 8), key), auditUserHash(secret, key));
  t.deepEqual(auditUserHash(secret, userHashOf(' alice ')), auditUserHash(secret, key));
});

test('the 64 key bits of identify_messages are the first 8 bytes of the key, signed', (t) => {
  const key = Buffer.alloc(32);
  key.writeBigInt64BE(-5n, 0);
  t.is(userKeyBits(key.toString('hex')), '-5');
  t.is(userKeyBits(userHashOf('bob').toString('hex')), userHashOf('bob').readBigInt64BE(0).toString());
});

const erased = { erasedAt: 1000, suppressedAt: null };
const suppressed = { erasedAt: null, suppressedAt: 1000 };

test('an erasure drops what was received up to its time, and nothing after', (t) => {
  t.is(dropReason(erased, 999), 'erased');
  t.is(dropReason(erased, 1000), 'erased');
  t.is(dropReason(erased, 1001), null);
});

test('a suppression drops what is received from its time on, and nothing before', (t) => {
  t.is(dropReason(suppressed, 999), null);
  t.is(dropReason(suppressed, 1000), 'suppressed');
  t.is(dropReason(suppressed, 5000), 'suppressed');
});

test('erased and suppressed together drop everything; no state drops nothing', (t) => {
  const both = { erasedAt: 1000, suppressedAt: 1000 };
  t.is(dropReason(both, 1), 'erased');
  t.is(dropReason(both, 1000), 'erased');
  t.is(dropReason(both, 1001), 'suppressed');
  t.is(dropReason(undefined, 1), null);
  t.is(dropReason({ erasedAt: null, suppressedAt: null }, 1), null);
});

test('consent decisions of addresses another profile claimed stay; the rest go, once each', (t) => {
  const mine = [
    { channel: 'email', value: 'a@example.com' },
    { channel: 'email', value: 'a@example.com' },
    { channel: 'sms', value: '+100' },
    { channel: 'email', value: 'shared@example.com' },
    { channel: 'sms', value: '' },
  ];
  const others = [
    { channel: 'email', value: 'shared@example.com' },
    // The same text on another channel is another address.
    { channel: 'email', value: '+100' },
  ];
  t.deepEqual(decisionsToRemove(mine, others), [
    { channel: 'email', value: 'a@example.com' },
    { channel: 'sms', value: '+100' },
  ]);
  t.deepEqual(decisionsToRemove([], others), []);
});

test('the operator is --by, else the OS user, never empty', (t) => {
  t.is(operatorName('dpo', 'root'), 'dpo');
  t.is(operatorName(undefined, 'root'), 'root');
  t.is(operatorName('  ', undefined), 'unknown');
  t.is(operatorName(undefined, undefined), 'unknown');
});
