// Errors a setting explains name it: the shapes of Prisma 7 (adapter-pg), node-postgres and
// ioredis errors as they were seen against this machine's services (real ones from Redis:
// test/unit/error-classes.test.ts).
import test from 'ava';
import { ReplyError } from 'ioredis';
import { Prisma } from '../../platform/generated/prisma/client.ts';
import { settingHint } from '../../cli/setting-errors.ts';

const config = { databaseUrl: 'postgresql://postgres@127.0.0.1:4199/intake_dev', redisUrl: 'redis://127.0.0.1:6390/2' };
const prisma = (code: string, cause: Record<string, unknown>, message: string) =>
  Object.assign(new Error(message), { name: 'PrismaClientKnownRequestError', code, meta: { driverAdapterError: { cause } } });

test('PostgreSQL unreachable: the address tried and DATABASE_URL, from .env when it came from there', (t) => {
  const err = prisma('P1001', { kind: 'DatabaseNotReachable', host: '127.0.0.1', port: 4199 }, "Can't reach database server at 127.0.0.1:4199");
  t.is(settingHint(err, config), 'cannot reach PostgreSQL at 127.0.0.1:4199 (DATABASE_URL): is it running, and is DATABASE_URL its address?');
  t.regex(settingHint(err, config, ['DATABASE_URL'])!, /\(DATABASE_URL, set in \.env\)/);
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:4199'), { code: 'ECONNREFUSED', address: '127.0.0.1', port: 4199 });
  t.regex(settingHint(refused, config)!, /^cannot reach PostgreSQL at 127\.0\.0\.1:4199/);
});

test('a database that does not exist: migrate, or check DATABASE_URL', (t) => {
  const err = prisma(
    'P1003',
    { originalCode: '3D000', kind: 'DatabaseDoesNotExist', db: 'intake_dev' },
    'Database `intake_dev` does not exist on the database server',
  );
  t.is(
    settingHint(err, config),
    'database "intake_dev" does not exist on 127.0.0.1:4199 (DATABASE_URL): run `npx intake migrate` (or `npm start`, which migrates) to create it, or point DATABASE_URL at the right one',
  );
  t.regex(
    settingHint(prisma('P2021', { originalCode: '42P01' }, 'The table `public.organizations` does not exist'), config)!,
    /no intake tables yet: run `npx intake migrate`/,
  );
  t.regex(
    settingHint(prisma('P1010', { originalCode: '28000', originalMessage: 'role "nobody" does not exist' }, 'denied'), config)!,
    /refused the user or password of DATABASE_URL: role "nobody"/,
  );
});

test('Redis: an unreachable server, a database number out of range and refused credentials name REDIS_URL', (t) => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6390'), { code: 'ECONNREFUSED', address: '127.0.0.1', port: 6390 });
  t.is(settingHint(refused, config), 'cannot reach Redis at 127.0.0.1:6390 (REDIS_URL): is it running, and is REDIS_URL its address?');
  t.regex(settingHint(new Error('ERR DB index is out of range'), config)!, /no such database number \(REDIS_URL\)/);
  t.regex(settingHint(new ReplyError('WRONGPASS invalid username-password pair or user is disabled.'), config)!, /refused the credentials of REDIS_URL/);
  t.regex(settingHint(new ReplyError('NOAUTH Authentication required.'), config)!, /refused the credentials of REDIS_URL/);
  t.is(settingHint(new Error('WRONGPASS invalid username-password pair'), config), null, 'the words, without a reply from Redis');
});

test("Prisma's initialization error names its code in errorCode: PostgreSQL unreachable all the same", (t) => {
  const err = new Prisma.PrismaClientInitializationError("Can't reach database server at 127.0.0.1:4199", '7.10.0', 'P1001');
  t.regex(settingHint(err, config)!, /^cannot reach PostgreSQL at 127\.0\.0\.1:4199/);
  t.is(settingHint(new Prisma.PrismaClientInitializationError("Can't reach database server", '7.10.0'), config), null, 'the words alone, without the code');
});

test('anything else: no hint (the message is printed as it is)', (t) => {
  t.is(settingHint(new Error('boom'), config), null);
  t.is(settingHint(Object.assign(new Error('connect ECONNREFUSED 10.0.0.9:80'), { code: 'ECONNREFUSED', address: '10.0.0.9', port: 80 }), config), null);
  t.is(settingHint(null, config), null);
});
