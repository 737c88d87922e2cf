// A keep-alive HTTP/1.1 client with full control of method, raw path, headers and body bytes
// (fetch would normalize or refuse some of what the fuzz sends).
import http from 'node:http';
import { conform } from '../helpers/api-conformance.ts';

export interface RawRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface RawReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The parsed body, or undefined when it is not JSON. */
  json: unknown;
}

export function rawClient(baseUrl: string) {
  const { hostname, port } = new URL(baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const statuses = new Map<number, number>();
  return {
    /** Replies by status since the last call (what a property exercised), e.g. `202×1184 400×310`. */
    tally() {
      const text = [...statuses]
        .sort(([a], [b]) => a - b)
        .map(([status, n]) => `${status}×${n}`)
        .join(' ');
      statuses.clear();
      return text;
    },
    send(req: RawRequest): Promise<RawReply> {
      return new Promise((resolve, reject) => {
        const r = http.request({ host: hostname, port, agent, method: req.method, path: req.path, headers: req.headers, timeout: 10_000 }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let json: unknown;
            try {
              json = JSON.parse(text);
            } catch {
              json = undefined;
            }
            const status = res.statusCode ?? 0;
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
            try {
              // Every reply of the three endpoints must match docs/openapi.yaml.
              conform({ method: req.method, path: req.path, status, header: (name) => headerValue(res.headers, name), text });
            } catch (err) {
              return reject(err);
            }
            resolve({ status, headers: res.headers, text, json });
          });
        });
        r.on('timeout', () => r.destroy(new Error(`no answer within 10 s: ${req.method} ${req.path}`)));
        r.on('error', reject);
        r.end(req.body);
      });
    },
    close: () => agent.destroy(),
  };
}

function headerValue(headers: http.IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(', ') : value;
}
