// The console pages' HTML, on the live view's (gateway/live/html.ts): the same shell and
// navigation bar, the same escaping of every value (esc, callerText, mono), and a few additions
// of their own: a definition list, a pager, stored JSON shown as stored, and action forms that
// carry the session's CSRF token.
//
// Why server-rendered: each page is one request that answers HTML read from PostgreSQL, so there
// is no front end to build, ship or keep in step with the API; the pages work with scripts off,
// no request leaves the operator's machine, and the dashboard's Content-Security-Policy ('self',
// no inline script but the live view's one reload by hash) holds for them unchanged. What a page
// shows is what a test reads from its HTML, as a person reads it.
import type Koa from 'koa';
import type { ConsoleState } from '../auth.ts';
import { esc, page } from '../../live/html.ts';

const STYLE = `<style>
dl.fields{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;background:#fff;padding:10px 14px;box-shadow:0 1px 2px #0001;margin:0 0 14px}
dl.fields dt{color:#55607a;font-size:12px;text-transform:uppercase}dl.fields dd{margin:0}
pre.json{background:#fff;box-shadow:0 1px 2px #0001;padding:10px 14px;overflow:auto;max-height:70vh;font:12px/1.45 ui-monospace,monospace;white-space:pre-wrap;overflow-wrap:anywhere}
h2{font-size:15px;margin:18px 0 8px}.pager{display:flex;gap:14px;margin:10px 0}
div.actions{display:flex;gap:14px;align-items:center;flex-wrap:wrap;background:#fff;padding:10px 14px;box-shadow:0 1px 2px #0001;margin:0 0 10px}
.actions form{display:inline-flex;gap:6px}.yes{color:#17692a}.no{color:#a1231c}
</style>`;

/** A console page: the dashboard's shell (navigation bar shared with the live view and bull-board), reloading only when asked (a privacy request's page while it runs). */
export function consolePage(options: { title: string; path: string; body: string; refreshSeconds?: number }): string {
  return page({ title: options.title, path: options.path, body: STYLE + options.body, refreshSeconds: options.refreshSeconds });
}

/** Rows of label → HTML (escape what goes in). */
export function fields(rows: [string, string][]): string {
  return `<dl class="fields">${rows.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join('')}</dl>`;
}

/** A query string from the values given (undefined and '' left out). */
export function query(values: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** The session's CSRF token as a form field (none without a session: no operator exists). */
export function csrfField(ctx: Koa.Context): string {
  const token = (ctx.state as ConsoleState).csrfToken;
  return token ? `<input type="hidden" name="_csrf" value="${esc(token)}">` : '';
}

/** Characters of stored JSON a page shows at most; the rest is said, not sent. */
export const JSON_SHOWN_CHARS = 256 * 1024;

/**
 * Stored JSON text laid out with two-space indents, every character of it kept as stored (it is
 * not parsed, so large numbers and escapes read exactly as the caller sent them).
 */
export function indentJson(text: string): string {
  let out = '';
  let depth = 0;
  let inString = false;
  const pad = () => '\n' + '  '.repeat(depth);
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === '\\') out += text[++i] ?? '';
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
    } else if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      if (text[i + 1] === close) {
        out += c + close;
        i++;
      } else {
        depth++;
        out += c + pad();
      }
    } else if (c === '}' || c === ']') {
      depth = Math.max(0, depth - 1);
      out += pad() + c;
    } else if (c === ',') out += c + pad();
    else if (c === ':') out += ': ';
    else if (!/\s/.test(c)) out += c;
  }
  return out;
}

/** Stored JSON as a <pre>: indented, escaped, cut at JSON_SHOWN_CHARS. */
export function jsonBlock(text: string): string {
  const cut = text.length > JSON_SHOWN_CHARS;
  const shown = indentJson(cut ? text.slice(0, JSON_SHOWN_CHARS) : text);
  const note = cut ? `<p class="note">The first ${JSON_SHOWN_CHARS / 1024} KiB of ${Math.ceil(text.length / 1024)} KiB are shown.</p>` : '';
  // Line by line: esc() shows a newline inside a value as its escape, and the layout's own are kept.
  return `<pre class="json">${shown.split('\n').map(esc).join('\n')}</pre>${note}`;
}

export const yesNo = (value: boolean, yes = 'yes', no = 'no') => `<span class="${value ? 'yes' : 'no'}">${esc(value ? yes : no)}</span>`;
