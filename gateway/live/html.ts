// The live view's HTML: server-rendered pages with no script but an optional reload, so a page
// shows what the server read when it was asked (a browser test reads it as a person would).
// Every text goes through esc(); text a caller sent goes through callerText() or mono(), which
// also isolate it (a right-to-left name moves nothing around it) and mark the characters that
// caller-text.ts never writes as themselves.
import { createHash } from 'node:crypto';
import { escapeCode, replaceUnshowable, SHOWN_CHARS } from './caller-text.ts';
import { ICON_LINKS } from './favicon.ts';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for an attribute or for the page's own words: HTML-escaped, unshowable characters as `\uXXXX`. */
export function esc(value: unknown): string {
  return replaceUnshowable(String(value ?? '')).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** Caller text in a cell: isolated in <bdi>, at most SHOWN_CHARS characters, each unshowable character marked. */
function isolated(value: unknown, className?: string): string {
  let text = String(value ?? '');
  const cut = text.length > SHOWN_CHARS;
  // A surrogate pair is not split: its high half alone would be shown as an escape.
  if (cut) text = text.slice(0, /[\ud800-\udbff]/.test(text[SHOWN_CHARS - 1]) ? SHOWN_CHARS - 1 : SHOWN_CHARS);
  const html = replaceUnshowable(
    text.replace(/[&<>"']/g, (c) => ESCAPES[c]),
    (c) => `<span class="ctl">${escapeCode(c)}</span>`,
  );
  return `<bdi${className ? ` class="${className}"` : ''}>${html}${cut ? '…' : ''}</bdi>`;
}

export const callerText = (value: unknown) => isolated(value);

export const PAGES = [
  { path: '/live/events', title: 'Events' },
  { path: '/live/identify', title: 'Identify calls' },
  { path: '/live/rates', title: 'Rates' },
  { path: '/live/dead-letters', title: 'Dead letters' },
  // The console's pages (gateway/console/pages, gateway/console/keys-page.ts).
  { path: '/console/events', title: 'Stored events' },
  { path: '/console/refused', title: 'Refused calls' },
  { path: '/console/person', title: 'Person' },
  { path: '/console/keys', title: 'Keys' },
] as const;

/** bull-board's first screen. */
export const QUEUES_PATH = '/';

/** The links every dashboard page shows at its top, bull-board's included: the live pages, then the queues. */
export function navLinks(current: string): string {
  return [...PAGES, { path: QUEUES_PATH, title: 'Queues' }]
    .map((p) => `<a href="${p.path}"${p.path === current ? ' class="on" aria-current="page"' : ''}>${esc(p.title)}</a>`)
    .join('');
}

/** The bar those links sit in; it sets its own font, as bull-board's page styles the rest of its body. */
export const NAV_STYLE = `
.intake-nav{font:14px/1.4 system-ui,sans-serif;background:#1d2330;color:#fff;height:40px;box-sizing:border-box;padding:0 20px;display:flex;gap:18px;align-items:center;white-space:nowrap;overflow-x:auto}
.intake-nav a{color:#cfd6e4;text-decoration:none}.intake-nav a.on{color:#fff;font-weight:600;border-bottom:2px solid #5b9cff}
.intake-nav .brand{font-weight:700;color:#fff;margin-right:12px}.intake-nav .right{margin-left:auto;font-size:12px;color:#9aa4b8}
.intake-nav form.logout{display:flex;gap:8px;align-items:center;margin:0 0 0 auto;font-size:12px;color:#9aa4b8}.intake-nav .right~form.logout{margin-left:0}
.intake-nav form.logout button{font:12px/1.4 system-ui,sans-serif;padding:2px 10px;border:1px solid #5b6478;border-radius:4px;background:transparent;color:#fff;cursor:pointer}`;

/** Where the bar shows the signed-in operator and the Log out button; sessionBar() fills it for each request. */
export const SESSION_SLOT = '<!--intake-session-->';

/**
 * A dashboard page with its bar's SESSION_SLOT filled: for a signed-in operator, the name, role and
 * a Log out button (POST /logout with the session's CSRF token, gateway/console/auth.ts); else nothing.
 */
export function sessionBar(html: string, session: { name: string; role: string; csrfToken: string } | null): string {
  const filled = session
    ? `<form class="logout" method="post" action="/logout"><span>${esc(session.name)} (${esc(session.role)})</span><input type="hidden" name="_csrf" value="${esc(session.csrfToken)}"><button type="submit">Log out</button></form>`
    : '';
  return html.replace(SESSION_SLOT, () => filled);
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}${NAV_STYLE}
main{padding:16px 20px}h1{font-size:18px;margin:0 0 12px}
form.filter{display:flex;gap:8px;align-items:center;margin-bottom:12px;flex-wrap:wrap}
input,select,button{font:inherit;padding:4px 8px;border:1px solid #c3c9d4;border-radius:4px;background:#fff}
button{cursor:pointer;background:#2f6fde;color:#fff;border-color:#2f6fde}
table{border-collapse:collapse;background:#fff;width:100%;box-shadow:0 1px 2px #0001}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e6e9ef;vertical-align:top}
th{background:#eef1f6;font-weight:600;font-size:12px;text-transform:uppercase;color:#55607a}
td.mono,.mono{font-family:ui-monospace,monospace;font-size:12px;overflow-wrap:anywhere}
bdi{unicode-bidi:isolate}.ctl{font-family:ui-monospace,monospace;font-size:11px;color:#a1231c;background:#fde2e1;border-radius:3px;padding:0 2px}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px}
.processed,.applied{background:#dff5e3;color:#17692a}.pending{background:#fff3d6;color:#8a5a00}
.failed,.conflict{background:#fde2e1;color:#a1231c}.duplicate{background:#e4ecfb;color:#254f9c}
.note{color:#55607a;font-size:12px;margin:8px 0}.hidden{color:#8a93a6;font-style:italic}
.flash{background:#e4ecfb;border:1px solid #b9cdf3;padding:6px 10px;border-radius:4px;margin-bottom:12px}
svg text{font-size:11px;fill:#55607a}`;

/**
 * Reloads the page every `data-ms` milliseconds unless a form field is being edited (a filter
 * being typed is not lost). The same text on every page, so the dashboard's Content-Security-Policy
 * allows it by its hash (SCRIPT_HASHES) and no other inline script runs.
 */
const RELOAD_SCRIPT =
  'setInterval(function(){var a=document.activeElement;if(!a||!/^(INPUT|SELECT)$/.test(a.tagName))location.reload()},+document.currentScript.dataset.ms)';

/** The CSP sources of the pages' inline scripts. */
export const SCRIPT_HASHES = [`'sha256-${createHash('sha256').update(RELOAD_SCRIPT).digest('base64')}'`];

/** A whole page: the navigation between the live pages and bull-board, then `body`. */
export function page(options: { title: string; path: string; body: string; refreshSeconds?: number }): string {
  const reload = options.refreshSeconds ? `<script data-ms="${options.refreshSeconds * 1000}">${RELOAD_SCRIPT}</script>` : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>intake · ${esc(options.title)}</title>${ICON_LINKS}<style>${STYLE}</style></head>
<body><header class="intake-nav"><span class="brand">intake</span>${navLinks(options.path)}<span class="right">${esc(new Date().toISOString().replace('T', ' ').slice(0, 19))} UTC</span>${SESSION_SLOT}</header>
<main><h1>${esc(options.title)}</h1>${options.body}</main>${reload}</body></html>`;
}

/** A table; cells are HTML already (escape what goes in). */
export function table(headers: string[], rows: string[][], empty: string): string {
  if (!rows.length) return `<p class="note">${esc(empty)}</p>`;
  const head = headers.map((h) => `<th>${esc(h)}</th>`).join('');
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`).join('');
  return `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

export const pill = (text: string) => `<span class="pill ${esc(text)}">${esc(text)}</span>`;
/** Caller text in a monospace face (IDs), isolated and marked as callerText() does. */
export const mono = (text: string) => isolated(text, 'mono');
export const when = (ms: number) => esc(new Date(ms).toISOString().replace('T', ' ').replace('Z', ''));

/** What an unauthenticated viewer sees instead of personal data. */
export const HIDDEN = '<span class="hidden">hidden</span>';

export interface Series {
  name: string;
  color: string;
  values: number[];
}

/** A plot's size and its margins (the y axis's numbers on the left, the legend on the right), in SVG units. */
const PLOT_FRAME = { width: 960, height: 280, left: 56, bottom: 28, top: 30, right: 130 } as const;

/** A line plot of per-minute values, oldest on the left; `labels` under the x axis. */
export function linePlot(series: Series[], labels: string[], unit: string): string {
  const { width, height, left, bottom, top, right } = PLOT_FRAME;
  const points = Math.max(...series.map((s) => s.values.length), 2);
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const x = (i: number) => left + (i * (width - left - right)) / (points - 1);
  const y = (v: number) => top + (1 - v / max) * (height - top - bottom);
  const grid = [0, 0.25, 0.5, 0.75, 1]
    .map((f) => {
      const v = Math.round(max * f);
      return `<line x1="${left}" x2="${width - right}" y1="${y(v)}" y2="${y(v)}" stroke="#e6e9ef"/><text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${v}</text>`;
    })
    .join('');
  const ticks = labels.map((label, i) => (label ? `<text x="${x(i)}" y="${height - 8}" text-anchor="middle">${esc(label)}</text>` : '')).join('');
  const lines = series
    .map((s, n) => {
      const d = s.values.map((v, i) => `${i ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join('');
      const legend = `<rect x="${width - right + 14}" y="${top + n * 20}" width="12" height="3" fill="${s.color}"/><text x="${width - right + 32}" y="${top + n * 20 + 5}">${esc(s.name)}</text>`;
      return `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2" data-series="${esc(s.name)}"/>${legend}`;
    })
    .join('');
  return `<svg role="img" aria-label="${esc(unit)}" viewBox="0 0 ${width} ${height}" width="100%" style="background:#fff;box-shadow:0 1px 2px #0001">${grid}${ticks}${lines}<text x="${left}" y="16">${esc(unit)}</text></svg>`;
}

/** A page answers GET (and HEAD) only, as HTML never cached: false once it has answered 405 to another method. */
export function startPage(ctx: { method: string; status: number; type: string; set(field: string, value: string): void }): boolean {
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
    ctx.status = 405;
    ctx.set('Allow', 'GET');
    return false;
  }
  ctx.set('Cache-Control', 'no-store');
  ctx.type = 'html';
  return true;
}
