// The script bull-board's page gets for a signed-in operator (gateway/live/board-page.ts): it adds
// the session's CSRF token to bull-board's own changes (XMLHttpRequest and fetch to this origin,
// any method but GET and HEAD), and to nothing else. Run in a VM context with a page's globals.
import { runInNewContext } from 'node:vm';
import test from 'ava';
import { CSRF_SCRIPT } from '../../gateway/live/board-page.ts';

function page(token: string | null) {
  const sent: { via: string; method: string; url: string; csrf: string | null }[] = [];
  class FakeXhr {
    method = '';
    url = '';
    headers: Record<string, string> = {};
    open(method: string, url: string) {
      this.method = method;
      this.url = url;
    }
    setRequestHeader(name: string, value: string) {
      this.headers[name] = value;
    }
    send() {
      sent.push({ via: 'xhr', method: this.method, url: this.url, csrf: this.headers['X-CSRF-Token'] ?? null });
    }
  }
  const window: Record<string, unknown> = {
    fetch: async (input: Request | string, init?: RequestInit) => {
      const req = new Request(typeof input === 'string' ? new URL(input, 'http://127.0.0.1:3001/queue/events') : input, init);
      sent.push({ via: 'fetch', method: req.method, url: req.url, csrf: req.headers.get('x-csrf-token') });
    },
  };
  const context = {
    window,
    document: { querySelector: () => (token === null ? null : { content: token }) },
    location: { href: 'http://127.0.0.1:3001/queue/events', origin: 'http://127.0.0.1:3001' },
    XMLHttpRequest: FakeXhr,
    Request,
    Headers,
    URL,
  };
  runInNewContext(CSRF_SCRIPT, context);
  const xhr = (method: string, url: string) => {
    const r = new FakeXhr();
    r.open(method, url);
    r.send();
  };
  return { sent, xhr, fetch: window.fetch as (input: string, init?: RequestInit) => Promise<void> };
}

test("bull-board's changes to this origin carry the token; reads and other origins do not", async (t) => {
  const p = page('tok-123');
  p.xhr('PUT', '/api/queues/events/pause');
  p.xhr('GET', '/api/queues');
  p.xhr('POST', 'http://elsewhere.example/api');
  await p.fetch('/api/queues/events/retry/failed', { method: 'PUT' });
  await p.fetch('/api/queues');
  await p.fetch('https://elsewhere.example/x', { method: 'POST' });
  t.deepEqual(
    p.sent.map((s) => [s.via, s.method, s.csrf]),
    [
      ['xhr', 'PUT', 'tok-123'],
      ['xhr', 'GET', null],
      ['xhr', 'POST', null],
      ['fetch', 'PUT', 'tok-123'],
      ['fetch', 'GET', null],
      ['fetch', 'POST', null],
    ],
  );
});

test('without the meta tag (no session) the script changes nothing', async (t) => {
  const p = page(null);
  p.xhr('PUT', '/api/queues/events/pause');
  await p.fetch('/api/x', { method: 'POST' });
  t.deepEqual(
    p.sent.map((s) => s.csrf),
    [null, null],
  );
});
