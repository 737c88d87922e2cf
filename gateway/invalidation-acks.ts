// The gateway's side of an operator command that must reach every gateway (invalidateEverywhere,
// operations/operator.ts): the command publishes a nonce on a channel, each gateway does its part
// and then publishes the nonce back, and the command waits for every ack.
import type { Logger } from '../platform/logger.ts';
import type { Redis } from '../platform/redis.ts';

export interface InvalidationDeps {
  /** The gateway's connection in subscriber mode (shared by every channel). */
  subscriber: Redis;
  publisher: Redis;
  channels: { invalidate: string; ack: string };
  log: Logger;
  /** Logged when the subscription cannot be made, with what the gateway does instead. */
  unsubscribed: string;
}

/**
 * Runs `work` for each nonce published on `channels.invalidate` and acks the nonce once it
 * resolves true; false leaves the command unconfirmed (it then says so). Resolves with whether
 * the subscription was made (a failure is logged with `unsubscribed`).
 */
export function answerInvalidations(deps: InvalidationDeps, work: () => Promise<boolean>): Promise<boolean> {
  const { subscriber, publisher, channels, log } = deps;
  subscriber.on('message', (channel: string, nonce: string) => {
    if (channel !== channels.invalidate) return;
    void work().then((done) => {
      if (done) acknowledge(publisher, channels.ack, nonce);
    });
  });
  // Not awaited by the callers: a gateway must start (and answer) while Redis is down.
  return subscriber.subscribe(channels.invalidate).then(
    () => true,
    (err: Error) => {
      log.warn({ err: err.message }, deps.unsubscribed);
      return false;
    },
  );
}

/**
 * Publishes an ack. The producer connection refuses commands while it is not connected (so
 * that Track fails fast); an ack refused so is sent once it reconnects, if within 10 s, about
 * as long as the operator's command waits for it.
 */
function acknowledge(publisher: Redis, channel: string, nonce: string): void {
  const send = () => publisher.publish(channel, nonce);
  send().catch(() => {
    const retry = () => {
      clearTimeout(timer);
      send().catch(() => {});
    };
    const timer = setTimeout(() => publisher.off('ready', retry), 10_000).unref();
    publisher.once('ready', retry);
  });
}
