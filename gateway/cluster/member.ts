// The side of one gateway process under a cluster primary (gateway/cluster/primary.ts): it
// tells the primary it listens, lends its metrics to every scrape and asks the primary for
// everyone's, and learns when to stop.
import { availableParallelism } from 'node:os';
import type { Registry } from 'prom-client';
import { metricsUnavailable } from '../errors.ts';
import { isMessage, type ToPrimary, type ToProcess } from './messages.ts';
import { jsonThreadsPerProcess } from './share.ts';

/** What /metrics serves: one registry, or every process's added up. */
export type MetricsSource = Pick<Registry, 'contentType' | 'metrics'>;

export interface ClusterMember {
  /**
   * Settles with the reason on the first SIGTERM or SIGINT. Later
   * signals change nothing: systemd signals every process of a unit and the primary forwards its
   * own, and a second one must not kill a process that is draining (runProcess bounds the drain).
   */
  stopped: Promise<string>;
  jsonThreads: number;
  /** Answers the primary's collections from `registry`; /metrics serves what the result gives: every process's metrics, added up. */
  shareMetrics(registry: Registry): MetricsSource;
  listening(port: number): void;
}

/** A scrape waits this long for the primary (which waits up to PART_TIMEOUT_MS for each process) before answering 503. */
const SCRAPE_TIMEOUT_MS = 5000;

/** Call first thing in a process the primary forked, so a signal during start-up is not lost. */
export function joinCluster(processes: number): ClusterMember {
  let stop!: (reason: string) => void;
  const stopped = new Promise<string>((resolve) => (stop = resolve));
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // A primary that dies closes the IPC channel, and Node's cluster then ends this process at
  // once (process.exit in its own 'disconnect' listener): no connection reaches it any more.

  return {
    stopped,
    jsonThreads: jsonThreadsPerProcess(availableParallelism(), processes),
    shareMetrics: (registry) => shareMetrics(registry),
    listening: (port) => send({ type: 'intake:listening', port }),
  };
}

/** A send that cannot throw or emit 'error' (the channel closes when the primary exits). */
function send(message: ToPrimary, onError: (err: Error) => void = () => {}): void {
  if (!process.send || !process.connected) return onError(new Error('no primary'));
  process.send(message, undefined, {}, (err: Error | null) => err && onError(err));
}

function shareMetrics(registry: Registry): MetricsSource {
  // This process's scrapes waiting for the primary's answer, by id.
  const waiting = new Map<number, (outcome: { text: string } | { error: Error }) => void>();
  const settle = (id: number, outcome: { text: string } | { error: Error }) => {
    waiting.get(id)?.(outcome);
    waiting.delete(id);
  };
  let next = 0;
  process.on('message', (message: unknown) => {
    if (!isMessage<ToProcess>(message)) return;
    if (message.type === 'intake:metrics-collect') {
      const { id } = message;
      // A collection that fails sends nothing: the primary answers that scrape 503 after
      // PART_TIMEOUT_MS; unheard, the rejection would end this process and its requests in flight.
      registry.getMetricsAsJSON().then(
        (metrics) => send({ type: 'intake:metrics-part', id, metrics }),
        () => {},
      );
    } else if (message.type === 'intake:metrics-result') {
      settle(message.id, 'text' in message ? { text: message.text } : { error: metricsUnavailable(message.error) });
    }
  });
  return {
    contentType: registry.contentType,
    metrics: () =>
      new Promise<string>((resolve, reject) => {
        const id = next++;
        const timer = setTimeout(() => settle(id, { error: metricsUnavailable('the gateway processes did not answer in time') }), SCRAPE_TIMEOUT_MS);
        waiting.set(id, (outcome) => {
          clearTimeout(timer);
          if ('text' in outcome) resolve(outcome.text);
          else reject(outcome.error);
        });
        send({ type: 'intake:metrics-request', id }, (err) => settle(id, { error: metricsUnavailable(err.message) }));
      }),
  };
}
