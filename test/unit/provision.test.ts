// What `npm test` does about a missing prerequisite (scripts/provision.mts), decided without
// touching the machine: which servers it starts, which Debian packages it installs, and what it
// leaves to the user, and why, given what is missing and what it may do here.
import test from 'ava';
import { describe, NO_APT, NO_PRIVILEGE, parseClusters, plan, type Ability, type Gap } from '../../scripts/provision.mts';

const root: Ability = { privilege: 'root', apt: true, pgCtlcluster: true, redisServer: true };
const noone: Ability = { ...root, privilege: null };

const gaps: Gap[] = [
  { name: 'PostgreSQL', remedy: { start: 'postgresql', url: 'postgresql://postgres@127.0.0.1:5432/intake_test' } },
  { name: 'Redis', remedy: { start: 'redis', url: 'redis://localhost:6380/2' } },
  { name: 'promtool', remedy: { apt: 'prometheus' } },
  { name: 'prometheus', remedy: { apt: 'prometheus' } },
  { name: 'chromium', remedy: { apt: 'chromium' } },
  { name: 'libfaketime', remedy: { apt: 'faketime' } },
];

test('as root with apt-get: the local servers started first, then each package installed once, whatever it fills', (t) => {
  t.deepEqual(plan(gaps, root), [
    { kind: 'start', service: 'postgresql', host: '127.0.0.1', port: 5432, for: ['PostgreSQL'] },
    { kind: 'start', service: 'redis', host: 'localhost', port: 6380, for: ['Redis'] },
    { kind: 'install', pkg: 'prometheus', for: ['promtool', 'prometheus'] },
    { kind: 'install', pkg: 'chromium', for: ['chromium'] },
    { kind: 'install', pkg: 'faketime', for: ['libfaketime'] },
  ]);
  t.deepEqual(plan(gaps, { ...root, privilege: 'sudo' }), plan(gaps, root), 'passwordless sudo does the same');
});

test('without root or passwordless sudo: nothing is done, one reason for all', (t) => {
  t.deepEqual(plan(gaps, noone), [{ kind: 'cannot', why: NO_PRIVILEGE, for: ['PostgreSQL', 'Redis', 'promtool', 'prometheus', 'chromium', 'libfaketime'] }]);
  t.regex(
    describe(plan(gaps, noone)[0]),
    /^PostgreSQL, Redis, promtool, prometheus, chromium, libfaketime: npm test installs packages and starts servers only as root or with passwordless sudo/,
  );
});

test('without apt-get the packages are left to the user, the servers still started', (t) => {
  const steps = plan(gaps, { ...root, apt: false });
  t.deepEqual(
    steps.map((s) => s.kind),
    ['start', 'start', 'cannot'],
  );
  t.deepEqual(steps[2], { kind: 'cannot', why: NO_APT, for: ['promtool', 'prometheus', 'chromium', 'libfaketime'] });
});

test("a server elsewhere is not this machine's to start; nor one whose program is not here", (t) => {
  const remote: Gap[] = [
    { name: 'PostgreSQL', remedy: { start: 'postgresql', url: 'postgresql://postgres@db.internal:5432/intake_test' } },
    { name: 'Redis', remedy: { start: 'redis', url: 'redis://[::1]:6379' } },
  ];
  const steps = plan(remote, { ...root, redisServer: false });
  t.is(steps.length, 2);
  t.like(steps[0], { kind: 'cannot', for: ['PostgreSQL'] });
  t.regex((steps[0] as { why: string }).why, /PostgreSQL at db\.internal is not on this machine/);
  t.like(steps[1], { kind: 'cannot', for: ['Redis'] });
  t.regex((steps[1] as { why: string }).why, /no redis-server on PATH/);
  t.like(plan(remote.slice(0, 1), { ...root, pgCtlcluster: false })[0], { kind: 'cannot' });
});

test('nothing missing, nothing to do', (t) => {
  t.deepEqual(plan([], root), []);
  t.deepEqual(plan([], noone), []);
});

test('each step said in one line', (t) => {
  const [pg, redis, prometheus] = plan(gaps, root);
  t.is(describe(pg), 'starting PostgreSQL on 127.0.0.1:5432 (not running)');
  t.is(describe(redis), 'starting Redis on localhost:6380 (not running)');
  t.is(describe(prometheus), "installing Debian's prometheus package (promtool and the Prometheus server the observability tests start)");
});

test("pg_lsclusters' lines: the cluster set to a port, and whether it runs", (t) => {
  const output = [
    '15  main    5432 down   postgres /var/lib/postgresql/15/main /var/log/postgresql/postgresql-15-main.log',
    '16  other   5433 online,recovery postgres /var/lib/postgresql/16/other /var/log/postgresql/postgresql-16-other.log',
    '',
  ].join('\n');
  t.deepEqual(parseClusters(output), [
    { version: '15', name: 'main', port: 5432, online: false },
    { version: '16', name: 'other', port: 5433, online: true },
  ]);
  t.deepEqual(parseClusters('Ver Cluster Port Status Owner Data directory Log file\n'), [], 'a header is no cluster');
});
