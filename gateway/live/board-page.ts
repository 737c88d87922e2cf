// bull-board's page as the dashboard serves it, and the policy that keeps every page of the
// dashboard on its own origin. bull-board's index.html asks fonts.googleapis.com for its fonts,
// which fails offline and tells Google whenever an operator opens the dashboard; its stylesheet
// names system fonts after those, so the page drops every <link> to another host and looks the
// same with the machine's fonts. It gains the bar of the live pages (html.ts), so the live view is
// one click from its first screen. The Content-Security-Policy makes the promise hold for what
// bull-board's scripts would load later, too: the browser refuses any other origin.
import { esc, NAV_STYLE, navLinks, QUEUES_PATH, SCRIPT_HASHES, SESSION_SLOT } from './html.ts';

/** The height of the bar above bull-board's own header. */
const BAR_PX = 40;

/**
 * The bar is fixed above bull-board's header; bull-board places its header, sidebar, page and
 * sticky headers from --header-offset, so adding the bar to it moves them all below the bar.
 * The header alone takes its height from that variable too: it keeps its own.
 */
const BOARD_STYLE = `${NAV_STYLE}
.intake-nav{position:fixed;top:0;left:0;right:0;height:${BAR_PX}px;z-index:100}
#root{--header-offset:calc(var(--header-height) + ${BAR_PX}px)}
#root>header{top:${BAR_PX}px;height:var(--header-height)}`;

/** A stylesheet, preconnect or any other <link> whose address names a host (absolute or protocol-relative). */
const LINK_ELSEWHERE = /<link\b[^>]*\bhref\s*=\s*["']?(?:[a-z][a-z0-9+.-]*:)?\/\/[^>]*>\s*/gi;

/**
 * bull-board's HTML page: nothing from another host, the dashboard's bar first in its body. For a
 * signed-in operator, the session's CSRF token and the script that sends it with each of
 * bull-board's changes (CSRF_SCRIPT_PATH).
 */
export function boardPage(html: string, csrfToken?: string): string {
  const csrf = csrfToken ? `<meta name="intake-csrf" content="${esc(csrfToken)}"><script src="${CSRF_SCRIPT_PATH}"></script>` : '';
  return html
    .replace(LINK_ELSEWHERE, '')
    .replace('</head>', `<style>${BOARD_STYLE}</style>${csrf}</head>`)
    .replace(
      /<body\b[^>]*>/i,
      (body) => `${body}<nav class="intake-nav" aria-label="dashboard"><span class="brand">intake</span>${navLinks(QUEUES_PATH)}${SESSION_SLOT}</nav>`,
    );
}

/** bull-board's options: the dashboard's icon as its logo and favicon, and no link to bull-board's documentation site. */
export const BOARD_UI = {
  boardLogo: { path: '/favicon.svg', width: 22, height: 22 },
  favIcon: { default: '/favicon.svg', alternative: '/favicon.png' },
  hideDocsLink: true,
};

/**
 * Every response of the dashboard carries it. Scripts: the dashboard's files and the live pages'
 * one reload script (by hash). Styles may be inline (bull-board's loading screen is inline CSS,
 * the live pages carry theirs); CSS reaches the network only through url() and @import, which
 * img-src, font-src and style-src keep on this origin. data: images (bull-board's job editor
 * draws some) are made by the page, not fetched.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  `script-src 'self' ${SCRIPT_HASHES.join(' ')}`,
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
].join('; ');

/** Where CSRF_SCRIPT is served (open: it holds no secret). */
export const CSRF_SCRIPT_PATH = '/console/csrf.js';

/**
 * bull-board's page calls its API with XMLHttpRequest (axios) and fetch: every call of this
 * origin but GET and HEAD gets the X-CSRF-Token header from the page's meta tag, which the
 * operators' gate asks of every change (gateway/console/auth.ts).
 */
export const CSRF_SCRIPT = `(function(){
var m=document.querySelector('meta[name="intake-csrf"]');if(!m)return;var token=m.content;
function mine(u){try{return new URL(u,location.href).origin===location.origin}catch(e){return false}}
function change(method){return !/^(GET|HEAD)$/i.test(method||'GET')}
var open=XMLHttpRequest.prototype.open,send=XMLHttpRequest.prototype.send;
XMLHttpRequest.prototype.open=function(method,url){this.__intake=change(method)&&mine(url);return open.apply(this,arguments)};
XMLHttpRequest.prototype.send=function(){if(this.__intake)this.setRequestHeader('X-CSRF-Token',token);return send.apply(this,arguments)};
var f=window.fetch;if(f)window.fetch=function(input,init){
var url=typeof input==='string'?input:(input&&input.url)||String(input),method=(init&&init.method)||(input&&input.method)||'GET';
if(change(method)&&mine(url)){var h=new Headers((init&&init.headers)||(input&&input.headers)||{});h.set('X-CSRF-Token',token);init=Object.assign({},init,{headers:h})}
return f.call(this,input,init)};
})();`;
