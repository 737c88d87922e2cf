// What an operator does to a person: forget, suppress, unsuppress. `intake users` and the admin
// API's privacy requests (gateway/console/privacy-requests.ts).
import { poolOf } from '../platform/db.ts';
import { forgetLiveCalls, forgetRefusedCalls, liveKeyPrefix } from '../platform/live-keys.ts';
import { withTimeout } from '../platform/with-timeout.ts';
import { forgetQueued } from '../events/forget-queued.ts';
import { forgetUser } from '../privacy/erasure.ts';
import { userHashOf } from '../profiles/person.ts';
import { auditHashHex, readAuditSecret } from '../privacy/audit.ts';
import { setSuppressed } from '../privacy/suppression.ts';
import type { OperatorDeps } from './operator.ts';

/** An environment as the privacy operations take it (findEnvironment's). */
export type PersonEnvironment = { id: string; pathValue: string };

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
      // What the gateways still hold of the person's calls is written first, so the removal below finds it.
      const unconfirmed = await deps.flushLiveViews();
      const prefix = liveKeyPrefix(deps.config);
      const removed = (await forgetLiveCalls(redis, prefix, env.id, userIds)) + (await forgetRefusedCalls(redis, prefix, env.id, userIds));
      // A gateway that did not confirm may write the person's calls later: running the command again removes them.
      return unconfirmed ? null : removed;
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
 * (events/forget-queued.ts). The erasure is done by then, so Redis being away (or a gateway that
 * cannot write what it holds of the live view) does not fail the command: null says so, and
 * running it again removes them.
 */
async function orNull(work: Promise<number | null>): Promise<number | null> {
  try {
    return await withTimeout(work, 5000, 'Redis did not answer');
  } catch {
    return null;
  }
}

/** Drops every later call of the user ID (`intake users suppress` and the admin API). */
export async function suppressPerson(deps: OperatorDeps, env: PersonEnvironment, userId: string, operator: string) {
  const audit = { secret: await readAuditSecret(poolOf(deps.db)), userHash: userHashOf(userId) };
  const { at, changed } = await setSuppressed(deps.db, env.id, audit, true, operator);
  await deps.invalidateSuppressions({ done: 'user suppressed', stale: 'accept its calls (Track events are dropped by the workers)' });
  return { environment: env.pathValue, userHash: auditHashHex(audit.secret, audit.userHash), suppressedAt: at, changed };
}

/** Stores calls of the user ID again (`intake users unsuppress` and the admin API). */
export async function unsuppressPerson(deps: OperatorDeps, env: PersonEnvironment, userId: string, operator: string) {
  const audit = { secret: await readAuditSecret(poolOf(deps.db)), userHash: userHashOf(userId) };
  const { changed } = await setSuppressed(deps.db, env.id, audit, false, operator);
  await deps.invalidateSuppressions({ done: 'suppression lifted', stale: 'drop its calls' });
  return { environment: env.pathValue, userHash: auditHashHex(audit.secret, audit.userHash), changed };
}
