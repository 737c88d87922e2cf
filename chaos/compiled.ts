// The run's build: the gateways, workers and operator commands run compiled code, as deployed.
// Through tsx each command would compile the sources it loads when it starts, hundreds of
// milliseconds more on a busy machine, and the erasure's time bound (erasure-complete.ts) is
// measured on `intake users forget` from start to exit. Built once per run, whatever dist/ holds
// (it may be stale after an edit), into the checkout's node_modules so its imports resolve.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { INTAKE_ROOT } from './intake-process.ts';

/** The settings that make `bin/intake.js` run the build in `dir`. */
export function runFromBuild(dir: string): Record<string, string> {
  return { INTAKE_RUN: 'dist', INTAKE_DIST: dir };
}

/** Compiles INTAKE_ROOT's sources (no type check: `npm test` does that) and resolves with the folder. */
export async function buildForRun(): Promise<string> {
  const dir = path.join(INTAKE_ROOT, 'node_modules', '.cache', 'intake-chaos-dist');
  await promisify(execFile)(process.execPath, [path.join(INTAKE_ROOT, 'scripts/build.mjs'), '--out-dir', dir, '--no-check'], { cwd: INTAKE_ROOT });
  return dir;
}
