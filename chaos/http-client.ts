// One client's keep-alive connections to the gateways (node:http, one socket per gateway, so a
// client's requests on a connection are in order), each connection named so the history says
// which requests shared one.
import http from 'node:http';
import type { Socket } from 'node:net';
import type { Outcome } from './history.ts';

/** A request with no answer after this long counts as a timeout (longer than any fault's hold plus PostgreSQL's 5 s bound). */
export const REQUEST_TIMEOUT_MS = 20_000;

export interface Target {
  name: string;
  port: number;
}

export interface Sent {
  conn: string;
  outcome: Outcome;
  invokedAt: number;
  completedAt: number;
}

export class ClientConnections {
  private readonly agents = new Map<string, http.Agent>();
  private readonly names = new WeakMap<Socket, string>();
  private sockets = 0;

  constructor(readonly client: string) {}

  private agent(target: Target): http.Agent {
    let agent = this.agents.get(target.name);
    if (!agent) {
      agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      this.agents.set(target.name, agent);
    }
    return agent;
  }

  private connName(target: Target, socket: Socket): string {
    let name = this.names.get(socket);
    if (!name) {
      name = `${target.name}/s${++this.sockets}`;
      this.names.set(socket, name);
    }
    return name;
  }

  request(target: Target, method: 'GET' | 'POST', path: string, headers: Record<string, string>, body?: string): Promise<Sent> {
    const invokedAt = Date.now();
    return new Promise((resolve) => {
      let conn = `${target.name}/-`;
      let settled = false;
      const done = (outcome: Outcome) => {
        if (settled) return;
        settled = true;
        resolve({ conn, outcome, invokedAt, completedAt: Date.now() });
      };
      const req = http.request(
        {
          agent: this.agent(target),
          host: '127.0.0.1',
          port: target.port,
          method,
          path,
          headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
          timeout: REQUEST_TIMEOUT_MS,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => done({ status: res.statusCode ?? 0, body: text }));
          res.on('error', (err) => done({ error: errorName(err) }));
        },
      );
      req.on('socket', (socket: Socket) => (conn = this.connName(target, socket)));
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
      req.on('error', (err) => done({ error: errorName(err) }));
      req.end(body);
    });
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

/** `refused` means nothing was sent; the others leave open whether the server received the request. */
function errorName(err: Error & { code?: string }): string {
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'refused';
    case 'ECONNRESET':
      return 'reset';
    case 'TIMEOUT':
      return 'timeout';
    default:
      return err.message === 'socket hang up' ? 'closed' : (err.code ?? err.message);
  }
}
