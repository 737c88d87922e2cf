// Statements sent back to back on one connection, answered in one round trip (node-postgres's
// pipeline mode: the pool's clients are made with `pipeline: true`, db.ts). PostgreSQL runs
// them in order; one that fails in a transaction aborts it, and those behind it fail too (a
// COMMIT behind it rolls back). Awaiting only the last would leave the others' errors
// unheard: done() settles every one and throws the first failure, in the order sent.
// node-postgres writes each statement to the socket on its own (a cork and uncork around its
// messages): the statements sent in one turn are held until the turn ends and go in one write.
import type { Duplex } from 'node:stream';
import type pg from 'pg';
import { QUERY_TIMEOUT_MS, withQueryTimeout } from './db.ts';
import { pgArrayLiteral } from './pg-array.ts';

export class Pipeline {
  private readonly sent: Promise<unknown>[] = [];
  /** The server-side bounds of the statements sent so far: the client waits for all of them. */
  private ahead = 0;
  private corked = false;

  constructor(private readonly client: pg.PoolClient) {}

  /** Sends a statement now; `ms`: its bound on the server (statement_timeout), the pool's by default. */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig, ms = QUERY_TIMEOUT_MS): Promise<pg.QueryResult<R>> {
    this.ahead += ms;
    if (!this.corked) this.corkForTheTurn();
    const values = config.values?.map((v) => (Array.isArray(v) ? (pgArrayLiteral(v) ?? v) : v));
    const result = this.client.query<R>(withQueryTimeout({ ...config, values }, this.ahead));
    result.catch(() => {}); // heard in done()
    this.sent.push(result);
    return result;
  }

  /** Holds the socket's writes until the current turn ends (cork counts: node-postgres's own pair inside it writes nothing). */
  private corkForTheTurn(): void {
    const { stream } = (this.client as unknown as { connection: { stream: Duplex } }).connection;
    stream.cork();
    this.corked = true;
    process.nextTick(() => {
      this.corked = false;
      stream.uncork();
    });
  }

  /** Waits for every statement sent; throws the first failure in the order sent. */
  async done(): Promise<void> {
    const outcomes = await Promise.allSettled(this.sent);
    const failed = outcomes.find((o) => o.status === 'rejected');
    if (failed) throw failed.reason;
  }
}
