// intake users …: the privacy operations on one person of an environment (docs/cli.md,
// docs/decisions.md). The SQL lives in privacy/erasure.ts, suppression.ts and
// person-export.ts; the rules in privacy/rules.ts.
import { userInfo } from 'node:os';
import { poolOf } from '../../platform/db.ts';
import { forgetLiveCalls, forgetRefusedCalls, liveKeyPrefix } from '../../platform/live-keys.ts';
import { forgetQueued } from '../../events/forget-queued.ts';
import { withTimeout } from '../../platform/with-timeout.ts';
import { operatorName } from '../../privacy/rules.ts';
import { forgetUser } from '../../privacy/erasure.ts';
import { userHashOf } from '../../profiles/person.ts';
import { exportEnvironment, exportPerson } from '../../privacy/person-export.ts';
import { auditHashHex, listAudit, readAuditSecret } from '../../privacy/audit.ts';
import { listSuppressed, setSuppressed } from '../../privacy/suppression.ts';
import { readArgs } from '../args.ts';
import { findEnvironment, OperatorError, STREAMED, type OperatorDeps } from '../operator.ts';
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

/** An environment as the privacy operations take it (findEnvironment's). */
type PersonEnvironment = { id: string; pathValue: string };

/**
 * Erases a person (`intake users forget` and the admin API's forget requests): PostgreSQL first,
 * then what Redis holds of them; `operator` is named in the audit.
 */
export async function forgetPerson(deps: OperatorDeps, env: PersonEnvironment, userId: string, options: { suppress: boolean; operator: string }) {
  const { suppress, operator } = options;
  const pool = poolOf(deps.db);
  const { outboxIds, ...summary } = await forgetUser(pool, { environmentId: env.id, userId, suppress, operator, auditSecret: await readAuditSecret(pool) });
  const userIds = [userId.trim(), ...summary.joinedUserIds];
  const liveViewEntries = await orNull(
    deps.redis().then(async (redis) => {
      const prefix = liveKeyPrefix(deps.config);
      return (await forgetLiveCalls(redis, prefix, env.id, userIds)) + (await forgetRefusedCalls(redis, prefix, env.id, userIds));
    }),
  );
  const erased = { environmentId: env.id, userIds, erasedAt: summary.erasedAt, outboxIds };
  const queuedJobs = await orNull(
    forgetQueued({ events: deps.eventsQueues(), deadLetters: deps.deadLetterQueue(), serviceEvents: deps.serviceEventsQueue() }, erased),
  );
  // Workers and Identify read the tombstone (and the suppression) from PostgreSQL; the gateways' sets only spare the queue.
  if (suppress) await deps.invalidateSuppressions({ done: `user erased and suppressed`, stale: 'queue its calls (dropped by the workers)' });
  return { environment: env.pathValue, ...summary, liveViewEntries, queuedJobs };
}

/**
 * What Redis holds of the person goes after PostgreSQL's: the dashboard live view's raw user IDs
 * (kept up to an hour), the refused calls whose body names them (kept up to a day) and their events and service events in jobs that ran or failed for good
 * (events/forget-queued.ts). The erasure is done by then, so Redis being away does not fail the
 * command: null says so, and running it again removes them.
 */
async function orNull(work: Promise<number>): Promise<number | null> {
  try {
    return await withTimeout(work, 5000, 'Redis did not answer');
  } catch {
    return null;
  }
}

/** users suppress <org-slug> <user-id> [--env] [--by] */
export async function usersSuppress(deps: OperatorDeps, argv: string[]) {
  const { env, userId, operator } = await person(deps, argv, 'users suppress');
  return suppressPerson(deps, env, userId, operator);
}

/** Drops every later call of the user ID (`intake users suppress` and the admin API). */
export async function suppressPerson(deps: OperatorDeps, env: PersonEnvironment, userId: string, operator: string) {
  const audit = { secret: await readAuditSecret(poolOf(deps.db)), userHash: userHashOf(userId) };
  const { at, changed } = await setSuppressed(deps.db, env.id, audit, true, operator);
  await deps.invalidateSuppressions({ done: 'user suppressed', stale: 'accept its calls (Track events are dropped by the workers)' });
  return { environment: env.pathValue, userHash: auditHashHex(audit.secret, audit.userHash), suppressedAt: at, changed };
}

/** users unsuppress <org-slug> <user-id> [--env] [--by] */
export async function usersUnsuppress(deps: OperatorDeps, argv: string[]) {
  const { env, userId, operator } = await person(deps, argv, 'users unsuppress');
  return unsuppressPerson(deps, env, userId, operator);
}

/** Stores calls of the user ID again (`intake users unsuppress` and the admin API). */
export async function unsuppressPerson(deps: OperatorDeps, env: PersonEnvironment, userId: string, operator: string) {
  const audit = { secret: await readAuditSecret(poolOf(deps.db)), userHash: userHashOf(userId) };
  const { changed } = await setSuppressed(deps.db, env.id, audit, false, operator);
  await deps.invalidateSuppressions({ done: 'suppression lifted', stale: 'drop its calls' });
  return { environment: env.pathValue, userHash: auditHashHex(audit.secret, audit.userHash), changed };
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
