// bin/intake.js never runs a build older than the sources beside it. A checkout of its own (the
// real bin/ with a one-line cli/intake.ts and a one-line dist/cli/intake.js, each printing which
// it is) is edited the way a developer would, and the real bin/intake.js is run after each step.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { STAMP_FILE, sourceDigest } from '../../bin/sources.js';

const run = promisify(execFile);
// Inside the repository, so the fixture's sources find tsx in node_modules as the real ones do.
const root = path.resolve('.scratch', `stale-dist-${randomBytes(4).toString('hex')}`);

/** Which code ran ('sources' or 'dist'), or the failure: exit code and stderr. */
async function intake(env: Record<string, string> = {}, at = root) {
  const clean = { ...process.env };
  delete clean.INTAKE_RUN; // the suite's own setting (package.json "ava"): these runs choose by themselves
  delete clean.INTAKE_DIST;
  try {
    const { stdout, stderr } = await run(process.execPath, [path.join(at, 'bin/intake.js')], { env: { ...clean, ...env } });
    return { ran: stdout.trim(), stderr, code: 0 };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { ran: e.stdout.trim(), stderr: e.stderr, code: e.code };
  }
}

/** A checkout whose dist/ was just built from its sources. */
function checkout(at = root) {
  rmSync(at, { recursive: true, force: true });
  cpSync('bin', path.join(at, 'bin'), { recursive: true });
  mkdirSync(path.join(at, 'cli'), { recursive: true });
  mkdirSync(path.join(at, 'platform'), { recursive: true });
  mkdirSync(path.join(at, 'dist/cli'), { recursive: true });
  // TypeScript syntax, so only a TypeScript loader runs it.
  writeFileSync(path.join(at, 'cli/intake.ts'), "const ran: string = 'sources';\nconsole.log(ran);\n");
  writeFileSync(path.join(at, 'platform/config.ts'), 'export const port: number = 3000;\n');
  writeFileSync(path.join(at, 'tsconfig.json'), '{}\n');
  writeFileSync(path.join(at, 'dist/cli/intake.js'), "console.log('dist');\n");
  stamp(at);
}

const stamp = (at = root) => writeFileSync(path.join(at, 'dist', STAMP_FILE), JSON.stringify({ digest: sourceDigest(at) }));

test.afterEach.always(() => rmSync(root, { recursive: true, force: true }));

test.serial('a build made from the sources beside it runs', async (t) => {
  checkout();
  t.like(await intake(), { ran: 'dist', code: 0 });
});

test.serial('an edited, added or deleted source file makes the sources run until the next build', async (t) => {
  checkout();
  appendFileSync(path.join(root, 'cli/intake.ts'), '// edited\n');
  t.like(await intake(), { ran: 'sources', code: 0 }, 'edited');
  stamp();
  t.like(await intake(), { ran: 'dist' }, 'built again');

  writeFileSync(path.join(root, 'platform/new.ts'), 'export {};\n');
  t.like(await intake(), { ran: 'sources' }, 'added');
  stamp();
  rmSync(path.join(root, 'platform/config.ts'));
  t.like(await intake(), { ran: 'sources' }, 'deleted');
  stamp();
  writeFileSync(path.join(root, 'tsconfig.json'), '{"compilerOptions":{"target":"ES2022"}}\n');
  t.like(await intake(), { ran: 'sources' }, 'a setting of the compiler changed');
});

test.serial('a build without its stamp (never finished, or from before stamps) does not run', async (t) => {
  checkout();
  rmSync(path.join(root, 'dist', STAMP_FILE));
  t.like(await intake(), { ran: 'sources', code: 0 });
});

test.serial('without sources (the image) the build runs; with neither, one line says so', async (t) => {
  checkout();
  rmSync(path.join(root, 'cli'), { recursive: true });
  rmSync(path.join(root, 'platform'), { recursive: true });
  t.like(await intake(), { ran: 'dist', code: 0 });
  rmSync(path.join(root, 'dist'), { recursive: true });
  const neither = await intake();
  t.is(neither.code, 1);
  t.regex(neither.stderr, /^intake: neither a build .* nor the sources .* are here\n$/);
});

test.serial('INTAKE_RUN=sources runs the sources over a current build; INTAKE_RUN=dist runs the build or fails, never a stale one', async (t) => {
  checkout();
  t.like(await intake({ INTAKE_RUN: 'sources' }), { ran: 'sources', code: 0 });
  t.like(await intake({ INTAKE_RUN: 'dist' }), { ran: 'dist', code: 0 });
  appendFileSync(path.join(root, 'cli/intake.ts'), '// edited\n');
  const stale = await intake({ INTAKE_RUN: 'dist' });
  t.is(stale.code, 1);
  t.is(stale.ran, '');
  t.regex(stale.stderr, /^intake: INTAKE_RUN=dist, but .* was built from other sources than these \(npm run build\)\n$/);
  const wrong = await intake({ INTAKE_RUN: 'compiled' });
  t.is(wrong.code, 1);
  t.regex(wrong.stderr, /INTAKE_RUN must be sources or dist/);
});

test.serial('INTAKE_DIST names another build folder, held to the same rule', async (t) => {
  checkout();
  const other = path.join(root, 'elsewhere');
  cpSync(path.join(root, 'dist'), other, { recursive: true });
  writeFileSync(path.join(other, 'cli/intake.js'), "console.log('elsewhere');\n");
  rmSync(path.join(root, 'dist'), { recursive: true });
  t.like(await intake({ INTAKE_DIST: other }), { ran: 'elsewhere' });
  appendFileSync(path.join(root, 'cli/intake.ts'), '// edited\n');
  t.like(await intake({ INTAKE_DIST: other }), { ran: 'sources' });
});
