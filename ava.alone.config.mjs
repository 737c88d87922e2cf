// Tests that bound other callers' latency run alone, after the rest of the suite (`npm test`):
// on a 2-core machine four test files at once starve any process for seconds, which is not what
// these measure. So do the Redis Cluster tests (six redis-servers, several intake processes):
// beside other files, BullMQ's close of a worker on the cluster could wait forever for its
// blocking connection's end (taskforcesh/bullmq#4065) and hold the file open. Same settings as
// package.json's "ava", other files, one file at a time.
export default {
  extensions: { ts: 'module' },
  nodeArguments: ['--import=tsx'],
  files: [
    'test/faults/bounded-work.test.ts',
    'test/faults/tenant-lockout.test.ts',
    'test/cluster/redis-failover.test.ts',
    'test/cluster/redis-cluster.test.ts',
    'test/cluster/partition-health.test.ts',
    'test/cluster/login-limit-cluster.test.ts',
  ],
  timeout: '5m',
  concurrency: 1,
  workerThreads: false,
  environmentVariables: { INTAKE_RUN: 'sources' },
};
