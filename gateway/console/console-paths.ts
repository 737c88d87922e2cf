// Where the console's pages and scripts are served: plain data, so the dashboard names them without
// loading the pages' code (gateway/dashboard.ts loads that on the first request to them).

export const KEYS_PATH = '/console/keys';
/** The copy button's script (served by the dashboard, open: it holds nothing). */
export const COPY_SCRIPT_PATH = '/console/copy.js';
export const COPY_SCRIPT = `document.addEventListener('click',function(e){var b=e.target.closest&&e.target.closest('[data-copy]');if(!b)return;
var i=document.getElementById(b.getAttribute('data-copy'));if(!i)return;i.select();
var done=function(){b.textContent='Copied'};if(navigator.clipboard)navigator.clipboard.writeText(i.value).then(done,function(){document.execCommand('copy');done()});else{document.execCommand('copy');done()}});`;
