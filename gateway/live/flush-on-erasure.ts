// An erasure (operations/people.ts) removes the person's raw user ID from the live view's Redis
// keys. Each gateway writes its Identify calls and refused calls there once a second, so calls
// answered just before the erasure may still be in a gateway's memory when it looks, and would
// be written after it. So the erasure first publishes a nonce (invalidateEverywhere,
// operations/operator.ts); every gateway writes what it holds and only then acks, and the
// erasure removes the person's calls once every gateway has.
import { answerInvalidations, type InvalidationDeps } from '../invalidation-acks.ts';

export interface FlushOnErasureDeps extends Omit<InvalidationDeps, 'unsubscribed'> {
  /** Writes what the recorders hold; rejects when a write fails (the erasure then says its Redis part is not done). */
  flush: () => Promise<void>;
}

export function flushOnErasure(deps: FlushOnErasureDeps): void {
  const { flush, log } = deps;
  // A call whose answer came in the same poll as the message is handed over by the callbacks
  // of that poll: flushing after them (setImmediate) writes it too.
  const flushed = () =>
    new Promise<void>((resolve) => setImmediate(resolve)).then(flush).then(
      () => true,
      (err: Error) => {
        log.warn({ err: err.message }, 'live view: not written for an erasure, which will say so');
        return false;
      },
    );
  answerInvalidations({ ...deps, unsubscribed: 'live view: erasures cannot reach this gateway' }, flushed);
}
