// One HTTP attempt over node:http(s) with a keep-alive agent, bounded by a timeout.
import http from 'node:http';
import https from 'node:https';

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

export class AttemptTimeout extends Error {
  readonly code = 'TIMEOUT';
}

export interface Transport {
  send(method: string, url: URL, headers: Record<string, string>, body: string | undefined, timeoutMs: number): Promise<Answer>;
  close(): void;
}

/** Connections are kept alive between calls (and retries): no TCP handshake per request. */
export function createTransport(maxSockets: number): Transport {
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets }),
    'https:': new https.Agent({ keepAlive: true, maxSockets }),
  };
  return {
    send(method, url, headers, body, timeoutMs) {
      const agent = agents[url.protocol as keyof typeof agents];
      if (!agent) return Promise.reject(new Error(`unsupported protocol ${url.protocol}`));
      const request = url.protocol === 'https:' ? https.request : http.request;
      return new Promise((resolve, reject) => {
        const req = request(url, { method, headers, agent }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', fail);
          res.on('end', () => {
            clearTimeout(timer);
            resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') });
          });
        });
        // The whole attempt, answer included, not just an idle socket.
        const timer = setTimeout(() => req.destroy(new AttemptTimeout(`no answer within ${timeoutMs} ms`)), timeoutMs);
        function fail(err: Error) {
          clearTimeout(timer);
          reject(err);
        }
        req.on('error', fail);
        req.end(body);
      });
    },
    close() {
      for (const agent of Object.values(agents)) agent.destroy();
    },
  };
}
