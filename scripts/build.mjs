// npm run build: compile the TypeScript sources to JavaScript in dist/ (tsconfig.build.json),
// stamped with the digest of the sources it compiled (bin/sources.js runs a build only while
// that digest matches). The build is written to a folder beside the target and moved into place
// when complete, so a process starting meanwhile finds the old build, none, or the new one whole.
//
//   node scripts/build.mjs [--out-dir <dir>] [--no-check] [--after-install]
//
// --no-check emits without type checking (tsc --noCheck; what `npm test` checks anyway).
// --after-install (postinstall): skip, with a note, where TypeScript is not installed.
import { execFileSync } from 'node:child_process';
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { STAMP_FILE, sourceDigest } from '../bin/sources.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { 'out-dir': { type: 'string' }, 'no-check': { type: 'boolean' }, 'after-install': { type: 'boolean' } } });
const outDir = path.resolve(root, values['out-dir'] ?? 'dist');

let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  if (!values['after-install']) throw new Error('TypeScript is not installed: npm ci (with dev dependencies) first');
  console.log('intake: TypeScript is not installed (a production install): no build; bin/intake.js needs a dist/ from elsewhere');
  process.exit(0);
}

// Taken before compiling: a source edited during the build leaves a stamp that no longer matches.
const digest = sourceDigest(root);
const partial = `${outDir}.partial-${process.pid}`;
rmSync(partial, { recursive: true, force: true });
const started = Date.now();
try {
  execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', partial, ...(values['no-check'] ? ['--noCheck'] : [])], {
    stdio: 'inherit',
  });
  writeFileSync(path.join(partial, STAMP_FILE), JSON.stringify({ digest, builtAt: new Date().toISOString() }) + '\n');
  rmSync(outDir, { recursive: true, force: true });
  renameSync(partial, outDir);
  console.log(`intake: built ${path.relative(root, outDir) || outDir} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (err) {
  // tsc has printed its errors; the previous build, if any, stays as it was.
  console.error(`intake: build failed (${err.status !== undefined ? `tsc exited ${err.status}` : err.message})`);
  process.exitCode = 1;
} finally {
  if (existsSync(partial)) rmSync(partial, { recursive: true, force: true });
}
