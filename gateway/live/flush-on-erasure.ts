// An erasure (operations/people.ts) removes the person's raw user ID from the live view's Redis
// keys. Each gateway writes its Identify calls and refused calls there once a second, so calls
// answered just before the erasure may still be in a gateway's memory when it looks, and would
// be written after it. So the erasure first publishes a nonce (invalidateEverywhere,
// operations/operator.ts); every gateway writes what it holds and only then acks, and the
// erasure removes the person's calls once every gateway has.
import type { Logger } from '../../platform/logger.ts';
import type { Redis } from '../../platform/redis.ts';

export interface FlushOnErasureDeps {
  /** The gateway's connection in subscriber mode (shared with the key cache and the suppressions). */
  subscriber: Redis;
  publisher: Redis;
  channels: { invalidate: string; ack: string };
  /** Writes what the recorders hold; rejects when a write fails (the erasure then says its Redis part is not done). */
  flush: () => Promise<void>;
  log: Logger;
}

export function flushOnErasure(deps: FlushOnErasureDeps): void {
  const { subscriber, publisher, channels, flush, log } = deps;
  subscriber.on('message', (channel: string, nonce: string) => {
    if (channel !== channels.invalidate) return;
    // A call whose answer came in the same poll as the message is handed over by the callbacks
    // of that poll: flushing after them (setImmediate) writes it too.
    setImmediate(() =>
      flush().then(
        () => publisher.publish(channels.ack, nonce).catch(() => {}),
        (err: Error) => log.warn({ err: err.message }, 'live view: not written for an erasure, which will say so'),
      ),
    );
  });
  subscriber.subscribe(channels.invalidate).catch((err: Error) => log.warn({ err: err.message }, 'live view: erasures cannot reach this gateway'));
}
