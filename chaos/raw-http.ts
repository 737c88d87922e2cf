// Pipelined requests over a raw socket: several requests in one TCP write, every byte the
// server sends back kept, and the answers read out of them in order. No HTTP client sends
// what Node's parser refuses, so these are written by hand.
import net from 'node:net';
import type { RawAnswer } from './history.ts';

export interface Exchange {
  received: string;
  closedByServer: boolean;
  error: string | null;
}

/** Writes `bytes` (latin1) at once; resolves when the server closes the connection or after `waitMs`. */
export function pipelined(port: number, bytes: string, waitMs: number): Promise<Exchange> {
  return new Promise((resolve) => {
    let received = '';
    let error: string | null = null;
    let gaveUp = false;
    const socket = net.connect(port, '127.0.0.1', () => socket.write(Buffer.from(bytes, 'latin1')));
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on(
      'error',
      (err: Error & { code?: string }) => (error = err.code === 'ECONNREFUSED' ? 'refused' : err.code === 'ECONNRESET' ? 'reset' : (err.code ?? err.message)),
    );
    const timer = setTimeout(() => {
      gaveUp = true;
      socket.destroy();
    }, waitMs);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ received, closedByServer: !gaveUp && error === null, error });
    });
  });
}

/** The HTTP/1.1 answers in `received`, in order (Content-Length or chunked bodies), and what is left after the last whole one. */
export function parseAnswers(received: string): { answers: RawAnswer[]; trailing: string } {
  const answers: RawAnswer[] = [];
  let rest = received;
  for (;;) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd < 0) break;
    const [statusLine, ...lines] = rest.slice(0, headEnd).split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
    if (!status) break;
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    let body: string;
    let after = rest.slice(headEnd + 4);
    if (status === 100) {
      rest = after;
      continue;
    }
    if (headers['transfer-encoding']?.toLowerCase().includes('chunked')) {
      const chunked = readChunked(after);
      if (!chunked) break;
      [body, after] = chunked;
    } else {
      const length = Number(headers['content-length'] ?? 0);
      if (after.length < length) break;
      body = after.slice(0, length);
      after = after.slice(length);
    }
    answers.push({ status, headers, body: Buffer.from(body, 'latin1').toString('utf8') });
    rest = after;
  }
  return { answers, trailing: rest };
}

function readChunked(text: string): [string, string] | null {
  let body = '';
  let rest = text;
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    if (lineEnd < 0) return null;
    const size = parseInt(rest.slice(0, lineEnd), 16);
    if (Number.isNaN(size)) return null;
    rest = rest.slice(lineEnd + 2);
    if (size === 0) {
      const end = rest.indexOf('\r\n');
      return end < 0 ? null : [body, rest.slice(end + 2)];
    }
    if (rest.length < size + 2) return null;
    body += rest.slice(0, size);
    rest = rest.slice(size + 2);
  }
}
