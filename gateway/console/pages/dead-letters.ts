// The console's dead letters (/console/dead-letters?env=<path value>), beside the stored events:
// the environment's events the worker refused (status `failed`), each with why and, for an admin,
// a Retry button that posts with the session's CSRF token to /console/dead-letters/retry. A retry
// is the live view's and `intake events retry`'s (events/dead-letter-retry.ts), audited with the
// operator's name (../dead-letter-actions.ts). The list is the live view's read of the
// dead-letter queue (gateway/live/data.ts), kept to the chosen environment.
import type Koa from 'koa';
import { isDeadLetterJobId } from '../../../events/dead-letter-retry.ts';
import { deadLetters, environmentByPath, type DeadLetterView, type EnvironmentChoice } from '../../live/data.ts';
import { callerText, esc, HIDDEN, mono, pill, table, when } from '../../live/html.ts';
import { adminForm, type ConsoleState } from '../auth.ts';
import { DEAD_LETTERS_PATH } from '../console-paths.ts';
import { retryDeadLetterAudited } from '../dead-letter-actions.ts';
import { hiddenWhy, showsPersonalData } from './access.ts';
import type { PagesDeps } from './deps.ts';
import { chosenEnvironment, environmentField, eventLink, EVENTS_PATH, noEnvironment } from './events.ts';
import { consolePage, csrfField, query } from './view.ts';

export { DEAD_LETTERS_PATH };
export const DEAD_LETTER_RETRY_PATH = `${DEAD_LETTERS_PATH}/retry`;

/** Failed jobs of the dead-letter queue a page reads, newest first (of every environment: the queue is one). */
export const DEAD_LETTERS_READ = 100;

const isAdmin = (ctx: Koa.Context) => (ctx.state as ConsoleState).operator?.role === 'admin';

export async function deadLettersPage(deps: PagesDeps, ctx: Koa.Context): Promise<void> {
  const sel = await chosenEnvironment(deps, ctx);
  let body = `<form class="filter" method="get" action="${DEAD_LETTERS_PATH}">${environmentField(sel)}<button type="submit">Show</button></form>`;
  if (!sel.env) {
    if (sel.asked) ctx.status = 404;
    body += noEnvironment(sel.asked);
  } else {
    body += retriedFlash(ctx) + (await letters(deps, ctx, sel.env));
  }
  // In the events pages' place of the navigation bar: they are one family.
  ctx.body = consolePage({ title: 'Dead letters', path: EVENTS_PATH, body });
}

function retriedFlash(ctx: Koa.Context): string {
  const retried = typeof ctx.query.retried === 'string' && ctx.query.retried !== '' ? ctx.query.retried : undefined;
  return retried === undefined ? '' : `<div class="flash">${mono(retried)} is being retried: the worker stores it unless it is refused again.</div>`;
}

async function letters(deps: PagesDeps, ctx: Koa.Context, env: EnvironmentChoice): Promise<string> {
  const personal = showsPersonalData(ctx, deps.config);
  const admin = isAdmin(ctx);
  const { letters, unread } = await deadLetters(deps.deadLetterQueue, deps.digests, deps.db, DEAD_LETTERS_READ);
  const mine = letters.filter((l) => l.environmentId === env.id);
  const rows = mine.map((l) => [
    l.failedAt === null ? '' : when(l.failedAt),
    callerText(l.event),
    eventLink(env.pathValue, l.messageId, mono(l.messageId)),
    personal ? mono(l.userId ?? '') : HIDDEN,
    pill('failed') + ' ' + (personal ? callerText(l.error) : HIDDEN),
    ...(admin ? [retryForm(ctx, env, l)] : []),
  ]);
  const headers = ['failed', 'event', 'messageId', 'user', 'why', ...(admin ? [''] : [])];
  let out = `<p class="note">Organization ${mono(env.org)}, environment ${mono(env.pathValue)}${env.removed ? ' (removed)' : ''}. <a href="${EVENTS_PATH}${esc(query({ env: env.pathValue, status: 'failed' }))}">Stored events with status failed →</a></p>`;
  out += table(headers, rows, 'No dead letter in this environment.');
  if (unread.jobs) out += `<p class="note">${unread.jobs} dead letter${unread.jobs === 1 ? '' : 's'} not read yet: reload to read on.</p>`;
  if (!personal) out += `<p class="note">Users and refusals (which may quote the event) are ${HIDDEN}: ${esc(hiddenWhy(ctx))}.</p>`;
  out += `<p class="note">${
    admin
      ? 'Retry sends the event through the worker once more (as intake events retry does), and the audit trail records it with your name: fix what refused it first.'
      : 'Retrying needs an admin operator (or intake events retry &lt;org&gt; &lt;messageId&gt;).'
  } The newest ${DEAD_LETTERS_READ} dead letters of all environments are read.</p>`;
  return out;
}

/** The dead letter named by its job id (ASCII), as the live view's form does. */
function retryForm(ctx: Koa.Context, env: EnvironmentChoice, l: DeadLetterView): string {
  return `<form method="post" action="${DEAD_LETTER_RETRY_PATH}"><input type="hidden" name="env" value="${esc(env.pathValue)}"><input type="hidden" name="job" value="${esc(l.jobId)}">${csrfField(ctx)}<button type="submit">Retry</button></form>`;
}

/** POST /console/dead-letters/retry: an admin's form (the gate checked its session and CSRF token, and refused a read-only operator). */
export async function retryDeadLetterForm(deps: PagesDeps, ctx: Koa.Context): Promise<void> {
  if (ctx.method !== 'POST') {
    ctx.status = 405;
    ctx.set('Allow', 'POST');
    return;
  }
  ctx.set('Cache-Control', 'no-store');
  // With no operator nobody retries here: the live view's button is that dashboard's.
  const posted = adminForm(ctx, {
    forbidden: 'Forbidden: retrying a dead letter needs an admin operator',
    notForm: 'send the dead-letters page’s form (application/x-www-form-urlencoded)',
  });
  if (!posted) return;
  const { fields: form, operator } = posted;
  const pathValue = form.get('env') ?? '';
  const jobId = form.get('job') ?? '';
  const env = pathValue ? await environmentByPath(deps.db, pathValue) : null;
  if (!env) return answer(ctx, 404, `No environment with the path value ${callerText(pathValue)}: nothing was retried.`);
  if (!isDeadLetterJobId(jobId)) return answer(ctx, 400, 'No dead letter named: nothing was retried.', env);
  const event = await retryDeadLetterAudited(deps, operator.name, jobId, env.id);
  if (!event) return answer(ctx, 409, 'This dead letter is not failed any more (retried or gone): nothing was retried.', env);
  ctx.status = 303;
  ctx.redirect(`${DEAD_LETTERS_PATH}${query({ env: env.pathValue, retried: event.messageId })}`);
}

function answer(ctx: Koa.Context, status: number, message: string, env?: EnvironmentChoice) {
  ctx.status = status;
  ctx.type = 'html';
  const back = `<p><a href="${DEAD_LETTERS_PATH}${esc(query({ env: env?.pathValue }))}">Back to the dead letters</a></p>`;
  ctx.body = consolePage({ title: 'Dead letters', path: EVENTS_PATH, body: `<p class="flash">${message}</p>${back}` });
}
