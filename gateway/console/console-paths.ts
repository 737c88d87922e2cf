// Where the console's pages and scripts are served: plain data, so the dashboard names them without
// loading the pages' code (gateway/dashboard.ts loads that on the first request to them).

export const KEYS_PATH = '/console/keys';
/** The copy button's script (served by the dashboard, open: it holds nothing). */
export const COPY_SCRIPT_PATH = '/console/copy.js';
export const COPY_SCRIPT = `document.addEventListener('click',function(e){var b=e.target.closest&&e.target.closest('[data-copy]');if(!b)return;
var i=document.getElementById(b.getAttribute('data-copy'));if(!i)return;i.select();
var done=function(){b.textContent='Copied'};if(navigator.clipboard)navigator.clipboard.writeText(i.value).then(done,function(){document.execCommand('copy');done()});else{document.execCommand('copy');done()}});`;

/** The person page's action forms post to PERSON_ACTIONS_PATH<action> (gateway/console/person-actions.ts). */
export const PERSON_ACTIONS_PATH = '/console/person/';
/** A privacy request's page, PRIVACY_REQUESTS_PATH/<id>, and its export's download, …/<id>/export. */
export const PRIVACY_REQUESTS_PATH = '/console/privacy-requests';

/** The environment's dead letters (gateway/console/pages/dead-letters.ts), linked from the events pages; its Retry posts to …/retry. */
export const DEAD_LETTERS_PATH = '/console/dead-letters';
