// npm test: first gets what the tests need (scripts/doctor.mts's testPrerequisites: Node.js, the
// test PostgreSQL and Redis, promtool, prometheus, chromium, and npm run chaos's faketime and
// locales): starts the local PostgreSQL and Redis when they are down and installs the Debian
// packages when it may (scripts/provision.mts), and says what is still missing and how to get it,
// running nothing then. Then it runs every group of the suite, each one even when an earlier one
// failed: the type check, docs:check, the tests, and the tests that run alone
// (ava.alone.config.mjs); with --node24 also NODE24_SUBSET on Node.js 24 from the npm registry's
// `node` package. Ends with one total line: "total: N passed, N failed, N skipped".
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { printFindings, testPrerequisites } from './doctor.mts';
import { provision } from './provision.mts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name: string) => path.join(root, 'node_modules/.bin', name);
const AVA = path.join(root, 'node_modules/ava/entrypoints/cli.mjs');

/**
 * What runs on Node.js 24 in CI beside the whole suite on this machine's Node.js: the files that
 * start every process (`npm start` and the CLI in the README's walk-through, `intake dashboard`
 * and `intake dev`, a gateway and a worker in the browser test and as child processes) and drive
 * them over HTTP and in a browser, plus the unit tests.
 */
export const NODE24_SUBSET = [
  'test/unit/**/*.test.ts',
  'test/docs/quickstart.test.ts',
  'test/ops/dashboard.test.ts',
  'test/ops/live-view.test.ts',
  'test/ops/env-file.test.ts',
  'test/faults/redis-database.test.ts',
];

export interface Counts {
  passed: number;
  failed: number;
  skipped: number;
}

/** ava's closing lines ("12 tests passed", "1 test failed", "2 known failures", "1 uncaught exception"…) as counts; its ✔ lines when it prints no passed count. */
export function avaCounts(output: string): Counts {
  const sum = (re: RegExp) => [...output.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
  // With failures ava's summary gives no passed count: its ✔ lines are counted instead.
  const passed = /^\s*\d+ tests? passed/m.test(output) ? sum(/^\s*(\d+) tests? passed/gm) : (output.match(/^\s*✔ /gm) ?? []).length;
  const failed =
    sum(/^\s*(\d+) tests? failed/gm) +
    sum(/^\s*(\d+) uncaught exceptions?/gm) +
    sum(/^\s*(\d+) unhandled rejections?/gm) +
    sum(/^\s*(\d+) tests? remained pending/gm) +
    sum(/^\s*(\d+) tests? timed out/gm);
  // Known failures (test.failing) are expected: not a failure of the run, not a pass either.
  const skipped = sum(/^\s*(\d+) tests? skipped/gm) + sum(/^\s*(\d+) tests? todo/gm) + sum(/^\s*(\d+) known failures?/gm);
  return { passed, failed, skipped };
}

/**
 * The lines that say what failed (ava's ✘ lines, timeouts, uncaught exceptions), repeated at the
 * end of the run: a CI log is often read from its tail, and the whole suite prints thousands of lines.
 */
export function failureLines(output: string): string[] {
  const wanted = /^\s*(✘|Timed out while running tests|Uncaught exception in|Unhandled rejection in|Failed to exit when running|Error: .*(exited|timed out))/;
  const lines = output.split('\n').filter((line) => wanted.test(line));
  return [...new Set(lines.map((line) => line.trimEnd().slice(0, 400)))].slice(0, 40);
}

interface Group {
  name: string;
  command: string;
  args: string[];
  /** ava's counts; a step without tests of its own (tsc, docs:check) counts as one test. */
  ava: boolean;
  env?: Record<string, string>;
}

/** Runs a group with its output passed through; resolves with its exit status and output. */
function run(group: Group): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(group.command, group.args, { cwd: root, env: { ...process.env, ...group.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk;
      process.stdout.write(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk;
      process.stderr.write(chunk);
    });
    child.once('error', (err) => resolve({ code: 127, output: `${group.name}: ${err.message}` }));
    child.once('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output }));
  });
}

async function main(argv: string[]): Promise<number> {
  const withNode24 = argv.includes('--node24');
  const { findings, cannot } = await provision(testPrerequisites(), (line) => console.log(line));
  const missing = findings.filter((f) => f.status === 'fail');
  if (missing.length) {
    console.error(
      `npm test needs what is missing below; nothing was run (npm run doctor -- --tests checks the same and what running the service needs, docs/development.md#tests says why each is needed):`,
    );
    printFindings(missing, process.stderr);
    for (const line of cannot) console.error(line);
    console.log(`total: 0 passed, ${missing.length} failed (prerequisites)`);
    return 1;
  }
  printFindings(findings);

  const groups: Group[] = [
    { name: 'typecheck', command: bin('tsc'), args: ['--noEmit'], ava: false },
    { name: 'docs:check', command: process.execPath, args: ['--import', 'tsx', path.join(root, 'scripts/docs/check.mts')], ava: false },
    { name: 'tests', command: process.execPath, args: [AVA], ava: true },
    { name: 'tests run alone', command: process.execPath, args: [AVA, '--config', 'ava.alone.config.mjs'], ava: true },
  ];
  if (withNode24) {
    // npx puts Node.js 24's bin first on PATH, so whatever the tests spawn (node, npm) is Node.js 24 too.
    groups.push({ name: 'Node.js 24 subset', command: 'npx', args: ['-y', '-p', 'node@24', '--', 'node', AVA, ...NODE24_SUBSET], ava: true });
  }

  const total: Counts = { passed: 0, failed: 0, skipped: 0 };
  const failedGroups: string[] = [];
  const failures: string[] = [];
  for (const group of groups) {
    console.log(`\n── ${group.name} ──`);
    const { code, output } = await run(group);
    const counts = group.ava ? avaCounts(output) : { passed: code === 0 ? 1 : 0, failed: code === 0 ? 0 : 1, skipped: 0 };
    // A group that failed without a failed test of its own (a crash, a timed-out file) still counts.
    if (code !== 0 && counts.failed === 0) counts.failed = 1;
    if (code !== 0) {
      failedGroups.push(group.name);
      failures.push(`${group.name}:`, ...failureLines(output));
    }
    total.passed += counts.passed;
    total.failed += counts.failed;
    total.skipped += counts.skipped;
  }
  console.log('');
  if (failedGroups.length) console.log(`failed: ${failedGroups.join(', ')}\n${failures.join('\n')}`);
  console.log(`total: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped`);
  return failedGroups.length ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
