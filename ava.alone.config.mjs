// Tests that bound other callers' latency run alone, after the rest of the suite (`npm test`):
// on a 2-core machine four test files at once starve any process for seconds, which is not
// what these measure. Same settings as package.json's "ava", other files.
export default {
  extensions: { ts: 'module' },
  nodeArguments: ['--import=tsx'],
  files: ['test/faults/bounded-work.test.ts'],
  timeout: '5m',
  workerThreads: false,
  environmentVariables: { INTAKE_RUN: 'sources' },
};
