// How the live view writes text into its HTML (gateway/live/html.ts, caller-text.ts): a caller's
// text is isolated in <bdi>, every control character (C0, DEL, C1), bidi control and unpaired
// surrogate is shown as a visible `\uXXXX` and never sent as itself, NUL included, and a long
// value is cut off with an ellipsis.
import test from 'ava';
import { escapeCode, replaceUnshowable, SHOWN_CHARS } from '../../gateway/live/caller-text.ts';
import { callerText, esc, mono, page, table } from '../../gateway/live/html.ts';

/** Every character the live view must not send as itself. */
const UNSHOWABLE = [
  ...Array.from({ length: 0x20 }, (_, i) => String.fromCharCode(i)),
  '\u007f',
  ...Array.from({ length: 0x20 }, (_, i) => String.fromCharCode(0x80 + i)),
  '\u061c',
  '\u200e',
  '\u200f',
  '\u202a',
  '\u202b',
  '\u202c',
  '\u202d',
  '\u202e',
  '\u2066',
  '\u2067',
  '\u2068',
  '\u2069',
  '\ud800',
  '\udfff',
];

const RAW = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

test('each unshowable character becomes its escape, in attributes and in cells alike', (t) => {
  for (const c of UNSHOWABLE) {
    const code = escapeCode(c);
    t.regex(code, /^\\u[0-9A-F]{4}$/);
    t.is(esc(`a${c}b`), `a${code}b`, code);
    t.is(callerText(`a${c}b`), `<bdi>a<span class="ctl">${code}</span>b</bdi>`, code);
    t.notRegex(callerText(`a${c}b`) + esc(c) + mono(c), RAW, code);
  }
  t.is(escapeCode('\u202e'), '\\u202E');
  t.is(escapeCode('\u0000'), '\\u0000');
});

test('what is shown as itself: printable text, right-to-left letters, surrogate pairs, format characters outside the rule', (t) => {
  for (const text of ['Signed Up', 'שלום', 'مرحبا', '🙂', 'é', 'a\u00a0b', 'zero\u200bwidth', 'tab\u2028line']) {
    t.is(replaceUnshowable(text), text, text);
  }
  t.is(callerText('שלום 🙂'), '<bdi>שלום 🙂</bdi>');
});

test('the issue: an override in an anonymous ID does not turn "(anonymous)" around; NUL is never sent', (t) => {
  const cell = `${mono('anon\u202eymous')} <span class="note">(anonymous)</span>`;
  t.is(cell, '<bdi class="mono">anon<span class="ctl">\\u202E</span>ymous</bdi> <span class="note">(anonymous)</span>');
  const html = page({ title: 'Events', path: '/live/events', body: table(['event', 'user'], [[callerText('Opened\u0000Box'), cell]], '') });
  t.false(html.includes('\u0000'));
  t.false(html.includes('\u202e'));
  t.notRegex(html.replace(/\n/g, ''), RAW);
  t.true(html.includes('Opened<span class="ctl">\\u0000</span>Box'));
  t.regex(html, /bdi\{unicode-bidi:isolate\}/);
});

test('HTML is escaped before anything else: markup in caller text stays text', (t) => {
  t.is(callerText('<b onclick="x">&\'</b>'), '<bdi>&lt;b onclick=&quot;x&quot;&gt;&amp;&#39;&lt;/b&gt;</bdi>');
  t.is(esc('"\u202e<'), '&quot;\\u202E&lt;');
  t.is(esc(null), '');
  t.is(callerText(undefined), '<bdi></bdi>');
});

test('a long value is cut at SHOWN_CHARS with an ellipsis, never inside a surrogate pair', (t) => {
  const long = 'x'.repeat(SHOWN_CHARS + 10);
  t.is(callerText(long), `<bdi>${'x'.repeat(SHOWN_CHARS)}…</bdi>`);
  t.is(callerText('x'.repeat(SHOWN_CHARS)), `<bdi>${'x'.repeat(SHOWN_CHARS)}</bdi>`, 'exactly SHOWN_CHARS: whole');
  const pair = `${'x'.repeat(SHOWN_CHARS - 1)}🙂tail`;
  t.is(callerText(pair), `<bdi>${'x'.repeat(SHOWN_CHARS - 1)}…</bdi>`);
  t.is(mono(long), `<bdi class="mono">${'x'.repeat(SHOWN_CHARS)}…</bdi>`);
});
