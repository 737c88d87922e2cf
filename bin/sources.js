// Which code `intake` runs: the compiled build when it was made from exactly the sources beside
// it, the TypeScript sources (through tsx) otherwise. A build left behind by an earlier
// `npm run build` therefore never runs code older than the sources a developer just edited:
// the build records a digest of what it compiled (build-stamp.json), and a mismatch means the
// sources win. Where there are no sources (the image ships the build only), the build runs.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

/** What tsconfig.build.json compiles, and the settings that shape its output. */
export const SOURCE_DIRS = [
  'cli',
  'gateway',
  'workers',
  'platform',
  'environments',
  'profiles',
  'privacy',
  'events',
  'identify',
  'journeys',
  'clients/typescript/src',
];
export const SOURCE_FILES = ['tsconfig.json', 'tsconfig.build.json'];
export const STAMP_FILE = 'build-stamp.json';
const ENTRY = 'cli/intake';

/** sha256 over the path and bytes of every source file (a rename or a deleted file changes it too). */
export function sourceDigest(root) {
  const files = [...SOURCE_FILES, ...SOURCE_DIRS.flatMap((dir) => filesUnder(root, dir))].sort();
  const hash = createHash('sha256');
  for (const file of files) {
    const full = path.join(root, file);
    hash.update(`${file}\0`);
    hash.update(existsSync(full) ? readFileSync(full) : '(missing)');
    hash.update('\0');
  }
  return hash.digest('hex');
}

function filesUnder(root, dir) {
  if (!existsSync(path.join(root, dir))) return [];
  return readdirSync(path.join(root, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) =>
      path
        .relative(root, path.join(entry.parentPath ?? entry.path, entry.name))
        .split(path.sep)
        .join('/'),
    );
}

export function readStamp(distDir) {
  try {
    return JSON.parse(readFileSync(path.join(distDir, STAMP_FILE), 'utf8'));
  } catch {
    return null; // no build, or one still being written (the stamp is its last file)
  }
}

export class ChoiceError extends Error {}

/**
 * `run` (INTAKE_RUN): unset for the rule above; `sources` to run the sources whatever dist/
 * holds (the test suite); `dist` to run the build or fail, never a stale one (the smoke test).
 * `dist` (INTAKE_DIST): another build folder than <root>/dist.
 * Returns the entry module to import and whether it needs tsx.
 */
export function chooseCode(root, { run = process.env.INTAKE_RUN, dist = process.env.INTAKE_DIST } = {}) {
  const distDir = path.resolve(root, dist || 'dist');
  const sources = { kind: 'sources', entry: path.join(root, `${ENTRY}.ts`) };
  const built = { kind: 'dist', entry: path.join(distDir, `${ENTRY}.js`) };
  const hasSources = existsSync(sources.entry);
  const stamp = existsSync(built.entry) ? readStamp(distDir) : null;
  const current = () => stamp !== null && (!hasSources || stamp.digest === sourceDigest(root));
  if (run === 'sources') {
    if (!hasSources) throw new ChoiceError(`INTAKE_RUN=sources, but there are no sources in ${root}`);
    return sources;
  }
  if (run === 'dist') {
    if (stamp === null) throw new ChoiceError(`INTAKE_RUN=dist, but ${distDir} holds no finished build (npm run build)`);
    if (!current()) throw new ChoiceError(`INTAKE_RUN=dist, but ${distDir} was built from other sources than these (npm run build)`);
    return built;
  }
  if (run) throw new ChoiceError(`INTAKE_RUN must be sources or dist, not ${JSON.stringify(run)}`);
  if (current()) return built;
  if (hasSources) return sources;
  throw new ChoiceError(`neither a build (${distDir}) nor the sources (${root}) are here`);
}
