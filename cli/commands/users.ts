// intake users …: the privacy operations on one person of an environment (docs/cli.md,
// docs/decisions.md). The SQL lives in privacy/erasure.ts, suppression.ts and
// person-export.ts; the rules in privacy/rules.ts.
import { userInfo } from 'node:os';
import { poolOf } from '../../platform/db.ts';
import { operatorName } from '../../privacy/rules.ts';
import { userHashOf } from '../../profiles/person.ts';
import { exportEnvironment, exportPerson } from '../../privacy/person-export.ts';
import { auditHashHex, listAudit, readAuditSecret } from '../../privacy/audit.ts';
import { listSuppressed } from '../../privacy/suppression.ts';
import { readArgs } from '../args.ts';
import { findEnvironment, OperatorError, STREAMED, type OperatorDeps } from '../../operations/operator.ts';
import { forgetPerson, suppressPerson, unsuppressPerson } from '../../operations/people.ts';
import type { OperatorName } from '../usage.ts';

function osUser(): string | undefined {
  try {
    return userInfo().username;
  } catch {
    return process.env.USER;
  }
}

async function person(deps: OperatorDeps, argv: string[], command: OperatorName) {
  const args = readArgs(argv, command);
  const [orgSlug, userId] = args.positionals;
  if (!userId?.trim()) throw args.usageError('the user ID is empty');
  const { env } = await findEnvironment(deps.db, orgSlug, args.values.env);
  return { env, userId, values: args.values, operator: operatorName(args.values.by, osUser()) };
}

/** users forget <org-slug> <user-id> [--env] [--suppress] [--by]: what was removed, counted per kind. */
export async function usersForget(deps: OperatorDeps, argv: string[]) {
  const { env, userId, values, operator } = await person(deps, argv, 'users forget');
  return forgetPerson(deps, env, userId, { suppress: values.suppress === 'true', operator });
}

/** users suppress <org-slug> <user-id> [--env] [--by] */
export async function usersSuppress(deps: OperatorDeps, argv: string[]) {
  const { env, userId, operator } = await person(deps, argv, 'users suppress');
  return suppressPerson(deps, env, userId, operator);
}

/** users unsuppress <org-slug> <user-id> [--env] [--by] */
export async function usersUnsuppress(deps: OperatorDeps, argv: string[]) {
  const { env, userId, operator } = await person(deps, argv, 'users unsuppress');
  return unsuppressPerson(deps, env, userId, operator);
}

/** users suppressed <org-slug> [--env] */
export async function usersSuppressed(deps: OperatorDeps, argv: string[]) {
  const { positionals, values } = readArgs(argv, 'users suppressed');
  const { env } = await findEnvironment(deps.db, positionals[0], values.env);
  return listSuppressed(deps.db, env.id, await readAuditSecret(poolOf(deps.db)));
}

/** users audit <org-slug> [--env] [--user]: --user keeps the records of that user ID (an operator holds the secret its hash is keyed with). */
export async function usersAudit(deps: OperatorDeps, argv: string[]) {
  const { positionals, values } = readArgs(argv, 'users audit');
  const { env } = await findEnvironment(deps.db, positionals[0], values.env);
  const entries = await listAudit(deps.db, env);
  if (values.user === undefined) return entries;
  const hash = auditHashHex(await readAuditSecret(poolOf(deps.db)), userHashOf(values.user));
  return entries.filter((e) => e.userHash === hash);
}

/** users export <org-slug> <user-id> [--env]: one JSON document, written as it is read. */
export async function usersExport(deps: OperatorDeps, argv: string[]) {
  const { positionals, values, usageError } = readArgs(argv, 'users export');
  const [orgSlug, userId] = positionals;
  if (!userId.trim()) throw usageError('the user ID is empty');
  const env = await exportEnvironment(poolOf(deps.db), orgSlug, values.env);
  if (typeof env === 'string') throw new OperatorError(env);
  const pool = poolOf(deps.db);
  await exportPerson(pool, env.id, userId, await readAuditSecret(pool), deps.out ?? process.stdout);
  return STREAMED;
}
