import test from 'ava';
import { ReplyError } from 'ioredis';
import { loadConfig } from '../../platform/config.ts';
import { CLUSTER_SLOTS, eventsPartitionTags, eventsQueueNames, keySlot, queueName } from '../../platform/queue-keys.ts';
import { credentials } from '../../platform/redis.ts';
import { ReplicaAckError } from '../../platform/replica-ack.ts';
import { triesAnotherPartition } from '../../gateway/event-batcher.ts';

test('keySlot: the slots Redis computes (the hash tag alone counts)', (t) => {
  // Figures from CLUSTER KEYSLOT on Redis 7.0 (also checked against the real cluster in test/cluster/).
  t.deepEqual(['{events:0}', '{events:1}', '{events:2}'].map(keySlot), [16382, 12255, 8124]);
  t.deepEqual(['{events-0}', '{events-1}', '{events-2}'].map(keySlot), [9498, 13627, 1368]);
  t.is(keySlot('intake:{events-0}:wait'), keySlot('{events-0}'));
  // An empty tag is no tag: the whole key counts.
  t.not(keySlot('a{}b'), keySlot(''));
  t.is(keySlot('123456789'), 0x31c3 % CLUSTER_SLOTS);
});

test('partition tags: one per equal part of the slot range, in its middle half, all different', (t) => {
  for (const n of [2, 3, 4, 5, 6, 9, 16, 64]) {
    const tags = eventsPartitionTags(n);
    t.is(new Set(tags).size, n);
    tags.forEach((tag, i) => {
      const slot = keySlot(tag);
      const width = CLUSTER_SLOTS / n;
      t.true(slot >= i * width + width / 4 && slot < i * width + (3 * width) / 4, `${tag} → ${slot} for part ${i} of ${n}`);
    });
  }
  t.deepEqual(eventsPartitionTags(1), ['events']);
});

test('queue names: unchanged on one Redis with one partition; hash-tagged on a cluster or with partitions', (t) => {
  const single = loadConfig({});
  const cluster = loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7001, 127.0.0.1:7002' });
  t.deepEqual(eventsQueueNames(single), ['events']);
  t.is(queueName('service-events', single), 'service-events');
  t.deepEqual(eventsQueueNames(cluster), ['{events}']);
  t.is(queueName('service-events', cluster), '{service-events}');
  const three = eventsQueueNames({ ...single, queuePartitions: 3 });
  t.is(three.length, 3);
  t.true(three.every((name) => /^\{events-\d+\}$/.test(name)));
  t.deepEqual(eventsQueueNames({ ...cluster, queuePartitions: 3 }), three);
});

test('REDIS_CLUSTER_NODES: host:port items; anything else is refused at start', (t) => {
  t.deepEqual(loadConfig({ REDIS_CLUSTER_NODES: 'a:1,[::1]:7002 , b.example:65535' }).redisClusterNodes, ['a:1', '[::1]:7002', 'b.example:65535']);
  t.deepEqual(loadConfig({ REDIS_CLUSTER_NODES: '' }).redisClusterNodes, []);
  for (const bad of ['a', 'a:0', 'a:70000', 'redis://a:1', 'a:1,,b:2']) t.throws(() => loadConfig({ REDIS_CLUSTER_NODES: bad }), undefined, bad);
});

test("a cluster's nodes take REDIS_URL's user, password and TLS", (t) => {
  t.deepEqual(credentials('redis://127.0.0.1:6379'), {});
  t.deepEqual(credentials('rediss://intake:p%40ss@cfg.example:6379'), { username: 'intake', password: 'p@ss', tls: {} });
  t.deepEqual(credentials('redis://:secret@h:1'), { password: 'secret' });
});

// The same rule on errors real servers and clients produce: test/unit/error-classes.test.ts.
test('a batch moves to the next partition when its master is away or its replicas do not confirm, not when Redis is full', (t) => {
  // ioredis's own refusals: plain Errors (Redis.js, cluster/index.js).
  for (const message of [
    'Connection is closed.',
    'Too many Cluster redirections. Last error: Error: Connection is closed.',
    "Cluster isn't ready and enableOfflineQueue options is false",
    "Stream isn't writeable and enableOfflineQueue options is false",
  ])
    t.true(triesAnotherPartition(new Error(message)), message);
  // Redis's answers: ioredis's ReplyError, known by the code they begin with.
  for (const reply of [
    'CLUSTERDOWN The cluster is down',
    'TRYAGAIN Multiple keys request during rehashing of slot',
    "READONLY You can't write against a read only replica.",
  ])
    t.true(triesAnotherPartition(new ReplyError(reply)), reply);
  t.true(triesAnotherPartition(new ReplicaAckError('0 of 1 replicas confirmed the write in time')));
  t.false(triesAnotherPartition(new ReplyError("OOM command not allowed when used memory > 'maxmemory'.")));
  t.false(triesAnotherPartition(new Error('CLUSTERDOWN The cluster is down')), 'the words, without a reply from Redis');
  t.false(triesAnotherPartition(new Error('enqueue took longer than 2000 ms')));
});
