// Statements sent back to back on one connection, answered in one round trip (node-postgres's
// pipeline mode: the pool's clients are made with `pipeline: true`, db.ts). PostgreSQL runs
// them in order; one that fails in a transaction aborts it, and those behind it fail too (a
// COMMIT behind it rolls back). Awaiting only the last would leave the others' errors
// unheard: done() settles every one and throws the first failure, in the order sent.
import type pg from 'pg';
import { QUERY_TIMEOUT_MS } from './db.ts';
import { pgArrayLiteral } from './pg-array.ts';

export class Pipeline {
  private readonly sent: Promise<unknown>[] = [];
  /** The server-side bounds of the statements sent so far: the client waits for all of them. */
  private ahead = 0;

  /** The connection's socket, corked while statements are added: they leave in one write. */
  private readonly socket: { cork(): void; uncork(): void } | undefined;

  constructor(private readonly client: pg.PoolClient) {
    this.socket = (client as unknown as { connection?: { stream?: { cork(): void; uncork(): void } } }).connection?.stream;
    this.socket?.cork();
  }

  /** Sends a statement now; `ms`: its bound on the server (statement_timeout), the pool's by default. */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig, ms = QUERY_TIMEOUT_MS): Promise<pg.QueryResult<R>> {
    this.ahead += ms;
    // node-postgres reads a per-query `query_timeout` (its typings do not list it).
    const values = config.values?.map((v) => (Array.isArray(v) ? (pgArrayLiteral(v) ?? v) : v));
    const result = this.client.query<R>({ ...config, values, query_timeout: this.ahead } as pg.QueryConfig);
    result.catch(() => {}); // heard in done()
    this.sent.push(result);
    return result;
  }

  /** Waits for every statement sent; throws the first failure in the order sent. */
  async done(): Promise<void> {
    this.socket?.uncork();
    const outcomes = await Promise.allSettled(this.sent);
    const failed = outcomes.find((o) => o.status === 'rejected');
    if (failed) throw failed.reason;
  }
}
