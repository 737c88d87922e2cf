// The X-Service-Environment header: absent or `prod` selects Production.

export type EnvironmentHeader = { kind: 'ok'; key: string } | { kind: 'invalid' } | { kind: 'production' };

export const PRODUCTION_KEY = 'prod';

const ENVIRONMENT_KEY_RE = /^[a-z0-9-]{1,32}$/;

const PROD: EnvironmentHeader = { kind: 'ok', key: PRODUCTION_KEY };
const INVALID: EnvironmentHeader = { kind: 'invalid' };
const PRODUCTION: EnvironmentHeader = { kind: 'production' };

export function readEnvironmentHeader(value: string | string[] | undefined): EnvironmentHeader {
  if (value === undefined) return PROD;
  // A repeated header is ambiguous about which environment is meant.
  if (typeof value !== 'string') return INVALID;
  // `production` is well-formed but refused with 403, not 400.
  if (value === 'production') return PRODUCTION;
  if (!ENVIRONMENT_KEY_RE.test(value)) return INVALID;
  return value === PRODUCTION_KEY ? PROD : { kind: 'ok', key: value };
}

// For `env create`: both names of Production are taken.
export function isValidEnvironmentKey(v: string): boolean {
  return ENVIRONMENT_KEY_RE.test(v) && v !== 'production' && v !== PRODUCTION_KEY;
}
