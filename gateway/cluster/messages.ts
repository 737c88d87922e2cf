// What the gateway's processes and their primary say to each other over the cluster's IPC
// channel (structured clone: metric values such as NaN and +Inf pass unchanged).
import type { Registry } from 'prom-client';

/** One process's registry, as prom-client's getMetricsAsJSON() gives it. */
export type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

export type ToPrimary =
  /** The process listens (on the port every process shares). */
  | { type: 'intake:listening'; port: number }
  /** GET /metrics reached this process: it wants every process's metrics, added up. */
  | { type: 'intake:metrics-request'; id: number }
  /** This process's own metrics, for the primary's collection `id`. */
  | { type: 'intake:metrics-part'; id: number; metrics: MetricsJson };

export type ToProcess =
  | { type: 'intake:metrics-collect'; id: number }
  | { type: 'intake:metrics-result'; id: number; text: string }
  | { type: 'intake:metrics-result'; id: number; error: string };

export function isMessage<T extends { type: string }>(message: unknown): message is T {
  return (
    typeof message === 'object' &&
    message !== null &&
    typeof (message as { type?: unknown }).type === 'string' &&
    (message as { type: string }).type.startsWith('intake:')
  );
}
