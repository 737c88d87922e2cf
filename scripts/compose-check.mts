// `npm run compose:check`: can this machine's Docker Compose run docker-compose.yml? Its version
// must be at least the minimum the file's header states, and `docker compose config` (observability
// profile) must accept the file. Exits 0 with one line saying so, or 1 with one line saying why.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export type Version = [number, number, number];

/** The minimum docker-compose.yml's header states ("Needs Docker Compose v2.23.1 or later"). */
export function statedMinimum(composeText: string): Version {
  const found = /^# Needs Docker Compose v(\d+)\.(\d+)\.(\d+) or later/m.exec(composeText);
  if (!found) throw new Error('docker-compose.yml does not state its minimum Docker Compose version');
  return [Number(found[1]), Number(found[2]), Number(found[3])];
}

/** The version in `docker compose version` output ("Docker Compose version v2.29.7-desktop.1", "2.23.1"), or null. */
export function parseComposeVersion(output: string): Version | null {
  const found = /\bv?(\d+)\.(\d+)\.(\d+)/.exec(output);
  return found ? [Number(found[1]), Number(found[2]), Number(found[3])] : null;
}

export function atLeast(version: Version, minimum: Version): boolean {
  for (let i = 0; i < 3; i++) if (version[i] !== minimum[i]) return version[i] > minimum[i];
  return true;
}

export const formatVersion = (v: Version) => `v${v.join('.')}`;

/** The verdict for this machine: ok, or the one line that says what is missing. */
export function checkCompose(root: string, run: (args: string[]) => string): { ok: boolean; message: string } {
  const minimum = statedMinimum(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8'));
  const needs = `docker-compose.yml needs Docker Compose ${formatVersion(minimum)} or later`;
  let output: string;
  try {
    output = run(['compose', 'version', '--short']);
  } catch {
    return {
      ok: false,
      message: `${needs}: \`docker compose\` is not available here (Debian's docker-compose 1.x cannot run it; install Docker's compose plugin)`,
    };
  }
  const version = parseComposeVersion(output);
  if (version === null) return { ok: false, message: `${needs}: cannot read the version in \`docker compose version\` output: ${output.trim()}` };
  if (!atLeast(version, minimum)) return { ok: false, message: `${needs}; this one is ${formatVersion(version)}` };
  try {
    run(['compose', '--project-directory', root, '--profile', 'observability', 'config', '--quiet']);
  } catch (err) {
    const stderr = String((err as { stderr?: unknown }).stderr ?? (err as Error).message).trim();
    return { ok: false, message: `docker compose config rejects docker-compose.yml: ${stderr}` };
  }
  return { ok: true, message: `Docker Compose ${formatVersion(version)} (at least ${formatVersion(minimum)}) accepts docker-compose.yml` };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const verdict = checkCompose(root, (args) => execFileSync('docker', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
  (verdict.ok ? process.stdout : process.stderr).write(verdict.message + '\n');
  process.exitCode = verdict.ok ? 0 : 1;
}
