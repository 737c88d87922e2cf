// Retrying a dead letter as an operator: the rule of events/dead-letter-retry.ts (what the CLI's
// `intake events retry` runs too), audited as `event.retry` with the operator's name. The
// console's dead-letters page and the live view's (when an operator is signed in) both call it,
// so a retry reads the same in the audit trail whichever button was pressed.
import type { Queue } from 'bullmq';
import type { Db } from '../../platform/db.ts';
import { retryDeadLetter } from '../../events/dead-letter-retry.ts';
import type { DeadLetterJob, QueuedEvent } from '../../events/jobs.ts';
import { auditChange } from './operators.ts';

/**
 * Retries the event the dead-letter job `jobId` holds (of `environmentId` when given) and audits
 * it; null when nothing failed is left to retry there (nothing audited then: nothing changed).
 */
export async function retryDeadLetterAudited(
  deps: { db: Db; deadLetterQueue: Queue<DeadLetterJob> },
  by: string,
  jobId: string,
  environmentId?: string,
): Promise<QueuedEvent | null> {
  const event = await retryDeadLetter(deps.deadLetterQueue, deps.db, jobId, environmentId);
  if (!event) return null;
  // The target names the environment as the privacy requests' records do; the messageId is no personal data (every viewer sees it).
  const env = await deps.db.environment.findUnique({ where: { id: event.environmentId }, select: { pathValue: true } });
  await auditChange(deps.db, by, 'event.retry', env?.pathValue ?? event.environmentId, { messageId: event.messageId, job: jobId });
  return event;
}
