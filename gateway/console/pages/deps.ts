// What the console's pages read from: given by index.ts, which routes to them.
import type { Queue } from 'bullmq';
import type { Config } from '../../../platform/config.ts';
import type { Db } from '../../../platform/db.ts';
import type { DeadLetterJob, EventBatchJob } from '../../../events/jobs.ts';
import type { Redis } from '../../../platform/redis.ts';
import type { JobDigests } from '../../live/job-digests.ts';

export interface PagesDeps {
  config: Pick<Config, 'dashboardPassword' | 'dashboardReadOnly' | 'queuePrefix' | 'redisClusterNodes' | 'refusedCallsKept' | 'refusedCallsPerSecond'>;
  db: Db;
  redis: Redis;
  /** Every partition of the events queue (its queued events show as pending). */
  eventsQueues: Queue<EventBatchJob>[];
  /** The dead-letter queue: the failed events, retried from the dead-letters page. */
  deadLetterQueue: Queue<DeadLetterJob>;
  digests: JobDigests;
}
