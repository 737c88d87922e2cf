// The console's pages under /console (docs/operations.md, "Console pages"): stored events and
// one event (events.ts), the dead letters with their Retry (dead-letters.ts), refused calls
// (refused.ts), a person (person.ts); keys and environments are keys-page.ts's. They sit behind
// the dashboard's gate like the live view and bull-board (gateway/dashboard.ts): an operator's
// session once any operator exists, else DASHBOARD_PASSWORD's basic auth when set, else loopback
// and personal data hidden (access.ts). Server-rendered: see view.ts for why.
import type { Queue } from 'bullmq';
import type Koa from 'koa';
import type { Db } from '../../../platform/db.ts';
import type { DeadLetterJob, EventBatchJob } from '../../../events/jobs.ts';
import type { Redis } from '../../../platform/redis.ts';
import { startPage } from '../../live/html.ts';
import { createJobDigests } from '../../live/job-digests.ts';
import { DEAD_LETTER_RETRY_PATH, deadLettersPage, DEAD_LETTERS_PATH, retryDeadLetterForm } from './dead-letters.ts';
import type { PagesDeps } from './deps.ts';
import { eventPage, eventsPage, EVENT_PATH, EVENTS_PATH } from './events.ts';
import { KEYS_PATH } from '../console-paths.ts';
import { personPage, PERSON_PATH } from './person.ts';
import { refusedPage, REFUSED_PATH } from './refused.ts';

/**
 * Bytes of queued jobs one read of the pages takes, and the heads kept between reads. The heads
 * kept must hold those of every job a read lists (the newest 100 of each state and partition),
 * else each read evicts what the next needs and every view reads its whole budget again: 100
 * jobs of 256 events keep about 10 MiB of heads. With 512,000 events queued in such jobs a view
 * took 130–230 ms (median) with 4 MiB kept, 5–20 ms with 24 MiB; the first view after new jobs
 * reads at most 8 MiB of them (bench/console-scale.mts, docs/performance.md).
 */
const QUEUED_BYTES_PER_READ = 8 * 1_048_576;
const QUEUED_HEADS_BYTES = 24 * 1_048_576;

/** The paths of the pages (the keys page's too), for the tests that try each without a session. */
export const CONSOLE_PAGES = [EVENTS_PATH, EVENT_PATH, DEAD_LETTERS_PATH, REFUSED_PATH, PERSON_PATH, KEYS_PATH] as const;

/** GET /console/… pages and the dead letters' Retry; anything else goes on (the person's actions are person-actions.ts's). */
export function consolePages(deps: {
  config: PagesDeps['config'];
  db: Db;
  redis: Redis;
  eventsQueues: Queue<EventBatchJob>[];
  deadLetterQueue: Queue<DeadLetterJob>;
}): Koa.Middleware {
  const pages: PagesDeps = {
    config: deps.config,
    db: deps.db,
    redis: deps.redis,
    eventsQueues: deps.eventsQueues,
    deadLetterQueue: deps.deadLetterQueue,
    digests: createJobDigests({ redis: deps.redis, bytesPerRead: QUEUED_BYTES_PER_READ, cacheBytes: QUEUED_HEADS_BYTES }),
  };
  const routes: Record<string, (deps: PagesDeps, ctx: Koa.Context) => Promise<void>> = {
    [EVENTS_PATH]: eventsPage,
    [EVENT_PATH]: eventPage,
    [DEAD_LETTERS_PATH]: deadLettersPage,
    [REFUSED_PATH]: refusedPage,
    [PERSON_PATH]: personPage,
  };
  return async function console(ctx, next) {
    if (ctx.path === '/console' || ctx.path === '/console/') return ctx.redirect(EVENTS_PATH);
    if (ctx.path === DEAD_LETTER_RETRY_PATH) return retryDeadLetterForm(pages, ctx);
    const route = routes[ctx.path];
    if (!route) return next();
    if (!startPage(ctx)) return;
    await route(pages, ctx);
  };
}
