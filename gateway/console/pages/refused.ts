// The console's Refused calls page (/console/refused?env=<path value>): an environment's sampled
// record of 4xx answers, newest first (gateway/live/refused-recorder.ts writes it): when, route,
// status, the check that refused, the error body answered, the key's suffix (never a key, never
// its hash) and the request id; the body's first 2 KiB to a viewer who sees personal data only
// (access.ts). Below them, the calls refused before an environment was known (a bad path value,
// a missing or unknown key) that named this path value; `?env=` left empty lists all of those.
import type Koa from 'koa';
import { MESSAGES } from '../../errors.ts';
import { liveKeyPrefix, REFUSED_BODY_CHARS, REFUSED_UNKNOWN, refusedCallsKey, type RefusedCallEntry } from '../../../platform/live-keys.ts';
import { listEnvironments, environmentByPath, type EnvironmentChoice } from '../../live/data.ts';
import { callerText, esc, HIDDEN, mono, table, when } from '../../live/html.ts';
import { hiddenWhy, showsPersonalData } from './access.ts';
import { noEnvironment } from './events.ts';
import type { PagesDeps } from './deps.ts';
import { consolePage } from './view.ts';

export const REFUSED_PATH = '/console/refused';

/** Error bodies and refusals that are ours word for word (no caller data in them): shown to every viewer. */
const FIXED_REFUSALS = new Set<string>(Object.values(MESSAGES));
const FIXED_ERROR_BODIES = new Set<string>(Object.values(MESSAGES).map((error) => JSON.stringify({ error })));

const text = (value: unknown) => (typeof value === 'string' && value.trim() ? value.trim() : undefined);

/** A list's entries, newest first (unreadable ones skipped). */
async function readList(deps: PagesDeps, listId: string): Promise<RefusedCallEntry[]> {
  const key = refusedCallsKey(liveKeyPrefix(deps.config), listId);
  const entries: RefusedCallEntry[] = [];
  for (const raw of await deps.redis.lrange(key, 0, Math.max(0, deps.config.refusedCallsKept - 1))) {
    try {
      entries.push(JSON.parse(raw) as RefusedCallEntry);
    } catch {
      // Not ours: skipped.
    }
  }
  return entries;
}

/**
 * The check and the error body as a viewer may see them: a validation message may quote what the
 * caller sent (a value, a property's name), so only our own fixed words are shown to a viewer
 * without personal data; an Identify refusal shows its kind without its first issue.
 */
function checkText(entry: RefusedCallEntry, personal: boolean): string {
  if (personal || FIXED_REFUSALS.has(entry.c)) return callerText(entry.c);
  if (entry.c.startsWith(`${MESSAGES.identifyInvalid}:`)) return `${esc(MESSAGES.identifyInvalid)}: ${HIDDEN}`;
  return HIDDEN;
}

function errorBodyText(entry: RefusedCallEntry, personal: boolean): string {
  if (!personal && !FIXED_ERROR_BODIES.has(entry.e)) return HIDDEN;
  return mono(entry.e);
}

const keyText = (entry: RefusedCallEntry) =>
  entry.k === undefined
    ? '<span class="note">none</span>'
    : entry.k === ''
      ? '<span class="note">(too short to show)</span>'
      : `<span class="suffix">${mono(`…${entry.k}`)}</span>`;

/** A suffix is read as one word. */
const STYLE = '<style>.suffix bdi{white-space:nowrap;overflow-wrap:normal}</style>';

function bodyText(entry: RefusedCallEntry, personal: boolean): string {
  if (entry.b === undefined) return '<span class="note">not read</span>';
  if (!personal) return HIDDEN;
  const bytes = entry.bl ?? entry.b.length;
  const cutNote = bytes > entry.b.length ? ` <span class="note">(first ${entry.b.length} of ${bytes} characters)</span>` : '';
  return `<pre class="json">${esc(entry.b)}</pre>${cutNote}`;
}

function refusedTable(entries: RefusedCallEntry[], personal: boolean, withPath: boolean, empty: string): string {
  const headers = ['answered', ...(withPath ? ['path value'] : []), 'route', 'status', 'check', 'error body', 'key', 'request id', 'body'];
  return table(
    headers,
    entries.map((e) => [
      when(e.t),
      ...(withPath ? [mono(e.p)] : []),
      esc(e.r),
      `<span class="mono" data-status>${esc(e.s)}</span>`,
      checkText(e, personal),
      errorBodyText(e, personal),
      keyText(e),
      mono(e.id),
      bodyText(e, personal),
    ]),
    empty,
  );
}

export async function refusedPage(deps: PagesDeps, ctx: Koa.Context): Promise<void> {
  const personal = showsPersonalData(ctx, deps.config);
  const choices = await listEnvironments(deps.db);
  const asked = text(ctx.query.env);
  const env: EnvironmentChoice | null = asked ? await environmentByPath(deps.db, asked) : null;
  const options = choices.map((c) => `<option value="${esc(c.pathValue)}">${esc(c.org)}${c.removed ? ' (removed)' : ''}</option>`).join('');
  let body = `${STYLE}<form class="filter" method="get" action="${REFUSED_PATH}"><label>environment <input name="env" list="environments" value="${esc(env?.pathValue ?? asked ?? '')}" size="24"></label><datalist id="environments">${options}</datalist><button type="submit">Show</button></form>`;
  const kept = deps.config.refusedCallsKept;
  if (kept === 0) body += `<p class="note">Refused calls are not recorded (REFUSED_CALLS_KEPT=0).</p>`;
  const unknown = await readList(deps, REFUSED_UNKNOWN);
  if (asked && !env) {
    ctx.status = 404;
    body += noEnvironment(asked);
  } else if (env) {
    body += `<p class="note">Organization ${mono(env.org)}, environment ${mono(env.pathValue)}${env.removed ? ' (removed)' : ''}.</p>`;
    body += refusedTable(await readList(deps, env.id), personal, false, 'No refused call recorded in this environment.');
    body += `<h2>Refused before the environment was known</h2>`;
    body += refusedTable(
      unknown.filter((e) => e.p === env.pathValue),
      personal,
      false,
      'None named this path value.',
    );
  } else {
    body += `<p class="note">Choose an environment. Below: every call refused before an environment was known (a bad path value, a missing or unknown key).</p>`;
    body += refusedTable(unknown, personal, true, 'None recorded.');
  }
  if (!personal) body += `<p class="note">Bodies and error texts that may quote the caller are ${HIDDEN}: ${esc(hiddenWhy(ctx))}.</p>`;
  body += `<p class="note">Each gateway process keeps at most ${deps.config.refusedCallsPerSecond} refused calls a second per environment (REFUSED_CALLS_PER_SECOND), and each list its newest ${kept} (REFUSED_CALLS_KEPT), for a day; a body's first ${REFUSED_BODY_CHARS / 1024} KiB. A key shows by its last 5 characters only.</p>`;
  ctx.body = consolePage({ title: 'Refused calls', path: REFUSED_PATH, body });
}
