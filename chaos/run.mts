// npm run chaos -- [--seed N] [--minutes M] | --ci   (--keep: keep logs, history and final state)
//
// A seeded fault-and-race checker: the real gateways, workers and operator commands against
// PostgreSQL (primary and replica) and a Redis Cluster of its own, faults and races from a
// seeded schedule, every operation recorded, and invariants checked over the history and the
// final state. Prints one JSON summary line per seed (violations above it, progress on stderr);
// exits 0 when no property was violated, 1 otherwise, 2 on a usage mistake.
// CHAOS_INTAKE_ROOT=<dir> runs the gateways, workers and commands of another checkout (say a
// commit extracted with `git archive`, its node_modules linked and its client generated).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseChaosArgs } from './args.ts';
import { installSignalHandlers } from './cleanup.ts';
import { buildForRun } from './compiled.ts';
import { germanLocale } from './postgres.ts';
import { runSeed } from './seed-run.ts';

const args = parseChaosArgs(process.argv.slice(2));
if ('error' in args) {
  process.stderr.write(`chaos: ${args.error}\nusage: npm run chaos -- [--seed <n>] [--minutes <m>] | --ci  [--keep]\n`);
  process.exit(2);
}

installSignalHandlers();
const began = Date.now();
const log = (line: string) => process.stderr.write(`chaos: ${line}\n`);
const localeDir = mkdtempSync(path.join(tmpdir(), 'intake-chaos-locale-'));
// Also on Ctrl-C, which ends the process from its signal handler.
process.once('exit', () => rmSync(localeDir, { recursive: true, force: true }));
let failed = false;
try {
  const locales = await germanLocale(localeDir);
  log('compiling the sources for the run');
  const build = await buildForRun();
  for (const seed of args.seeds) {
    try {
      const result = await runSeed(seed, args.minutes, { locales, build }, log, args.keep);
      if (result.report) process.stdout.write(`${result.report}\n`);
      process.stdout.write(`${JSON.stringify(result.summary)}\n`);
      if (result.violations.length) failed = true;
    } catch (err) {
      failed = true;
      const logDir = (err as { logDir?: string }).logDir;
      process.stdout.write(`${JSON.stringify({ seed, minutes: args.minutes, error: (err as Error).message, ...(logDir ? { logs: logDir } : {}) })}\n`);
    }
  }
} finally {
  rmSync(localeDir, { recursive: true, force: true });
}
log(
  `${args.seeds.length} seed${args.seeds.length === 1 ? '' : 's'} in ${((Date.now() - began) / 1000).toFixed(0)} s: ${failed ? 'violations found' : 'no violation'}`,
);
process.exit(failed ? 1 : 0);
