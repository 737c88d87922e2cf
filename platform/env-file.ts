// One configuration for every process of a checkout: `intake` (and `npm run doctor`) read the
// `.env` file of the working directory, so the shell that runs `npm start` and the one that
// runs `npx intake …` use the same DATABASE_URL, PORT and the rest. The file is parsed as
// Node's own --env-file parses it (util.parseEnv), and, as there, a variable set in the
// environment wins over the file.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';

export const ENV_FILE_SETTING = 'INTAKE_ENV_FILE';
const DEFAULT_FILE = '.env';

export class EnvFileError extends Error {}

export interface EnvFileResult {
  /** The file read (absolute), or null when there was none. */
  file: string | null;
  /** The names taken from it: set there and not in the environment. */
  names: string[];
}

/**
 * Sets in `env` every variable of the env file that `env` does not set already. The file is
 * INTAKE_ENV_FILE (relative to `cwd`), `.env` by default; a missing `.env` is no file, a missing
 * file named by INTAKE_ENV_FILE is an error; INTAKE_ENV_FILE='' reads none.
 */
export function loadEnvFile(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): EnvFileResult {
  const named = env[ENV_FILE_SETTING];
  if (named === '') return { file: null, names: [] };
  const file = path.resolve(cwd, named ?? DEFAULT_FILE);
  if (!existsSync(file)) {
    if (named === undefined) return { file: null, names: [] };
    throw new EnvFileError(`${ENV_FILE_SETTING}=${JSON.stringify(named)}: no such file (${file})`);
  }
  let parsed: NodeJS.Dict<string>;
  try {
    parsed = parseEnv(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new EnvFileError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const names: string[] = [];
  for (const [name, value] of Object.entries(parsed)) {
    // The file cannot name another file: which file is read is decided before it is read.
    if (value === undefined || name === ENV_FILE_SETTING || env[name] !== undefined) continue;
    env[name] = value;
    names.push(name);
  }
  return { file, names };
}
