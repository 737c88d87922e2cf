// platform/pipeline.ts against a real PostgreSQL: the statements sent in one turn leave in one
// socket write, each still answered, and a failure is heard in the order sent.
import test from 'ava';
import pg from 'pg';
import { Pipeline } from '../../platform/pipeline.ts';
import { TEST_DATABASE_URL } from '../helpers/services.ts';

async function pipelinedClient(): Promise<{ client: pg.PoolClient; writes: () => number; close: () => Promise<void> }> {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString(), pipeline: true } as pg.ClientConfig);
  await client.connect();
  client.on('error', () => {});
  // What reaches the socket's handle: one call of _write or _writev per write to the kernel.
  type Write = (...args: unknown[]) => void;
  const stream = (client as unknown as { connection: { stream: Record<'_write' | '_writev', Write> } }).connection.stream;
  let writes = 0;
  for (const method of ['_write', '_writev'] as const) {
    const original = stream[method].bind(stream);
    stream[method] = (...args) => {
      writes++;
      original(...args);
    };
  }
  return { client: client as unknown as pg.PoolClient, writes: () => writes, close: () => client.end() };
}

test('the statements sent in one turn go out in one write, each answered', async (t) => {
  const { client, writes, close } = await pipelinedClient();
  try {
    const before = writes();
    const pipe = new Pipeline(client);
    const first = pipe.query<{ n: number }>({ text: 'SELECT $1::int AS n', values: [1] });
    const second = pipe.query<{ n: number }>({ name: 'pipeline-test-second', text: 'SELECT $1::int + 1 AS n', values: [1] });
    const third = pipe.query<{ a: string }>({ text: 'SELECT $1::text[] AS a', values: [['x', 'y']] });
    await pipe.done();
    t.is(writes() - before, 1, 'three statements, one write');
    t.is((await first).rows[0].n, 1);
    t.is((await second).rows[0].n, 2);
    t.deepEqual((await third).rows[0].a, ['x', 'y']);
  } finally {
    await close();
  }
});

test('statements sent after an await go in a write of their own, and the first failure is thrown', async (t) => {
  const { client, writes, close } = await pipelinedClient();
  try {
    const pipe = new Pipeline(client);
    await pipe.query({ text: 'SELECT 1' });
    const before = writes();
    pipe.query({ text: 'SELECT 1/0' });
    pipe.query({ text: 'SELECT $1::int', values: ['not a number'] });
    await t.throwsAsync(pipe.done(), { message: 'division by zero' });
    t.is(writes() - before, 1);
  } finally {
    await close();
  }
});
