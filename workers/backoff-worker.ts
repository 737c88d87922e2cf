// BullMQ's Worker with a backoff where its main loop has none. When fetching the next job fails
// with an answer from Redis rather than a lost connection (above all `OOM command not allowed`
// while Redis is full: moveToActive is a script that writes), BullMQ 5.81 emits 'error' and asks
// again at once (Worker.mainLoop → retryIfFailed with onlyEmitError, which waits only after
// connection errors; taskforcesh/bullmq#3504). Measured here: ~5,000 refusals a second per
// worker, each an 'error' event, for as long as Redis stays full. This subclass waits before the
// failure goes back to BullMQ: 100 ms doubled per consecutive failure, at most 5 s, reset by the
// first fetch that succeeds; close() ends the wait at once.
//
// It relies on one internal of the pinned BullMQ: the protected `moveToActive(client, token,
// name)` that the main loop calls for every fetch. test/faults/redis-full.test.ts counts the
// worker's errors while Redis is full and fails if a new version stops going through it.
import { setTimeout as sleep } from 'node:timers/promises';
import { isNotConnectionError, Worker, type Job, type Processor, type RedisClient, type WorkerOptions } from 'bullmq';
import { backoffMs } from '../platform/backoff.ts';

const FIRST_WAIT_MS = 100;
export const MAX_FETCH_WAIT_MS = 5000;

export class BackoffWorker<T> extends Worker<T> {
  #failures = 0;
  readonly #closing = new AbortController();

  constructor(name: string, processor: Processor<T>, opts: WorkerOptions) {
    super(name, processor, opts);
    this.once('closing', () => this.#closing.abort());
  }

  protected override async moveToActive(client: RedisClient, token: string, name?: string): Promise<Job<T>> {
    try {
      const job = await super.moveToActive(client, token, name);
      this.#failures = 0;
      return job;
    } catch (err) {
      // Connection errors already wait in BullMQ (runRetryDelay) and while ioredis reconnects.
      if (isNotConnectionError(err as Error) && !this.#closing.signal.aborted) {
        await sleep(backoffMs(this.#failures++, FIRST_WAIT_MS, MAX_FETCH_WAIT_MS), undefined, { signal: this.#closing.signal }).catch(() => {});
      }
      throw err;
    }
  }
}
