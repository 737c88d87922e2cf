// Warnings that can repeat without end (a BullMQ worker's 'error' events while Redis refuses
// its scripts) as a bounded number of lines: the first of a kind is logged at once; repeats are
// counted and logged as one line with the count at the end of each interval; a kind quiet for a
// whole interval is forgotten, so its next occurrence is logged at once again.
import type { Logger } from './logger.ts';

export interface WarnThrottle {
  warn(what: string, err: Error): void;
  close(): void;
}

/** Kinds tracked at once; beyond, new kinds share one entry (a flood of distinct messages stays bounded too). */
const MAX_KINDS = 50;

interface Kind {
  what: string;
  err: string;
  repeats: number;
}

/** The message without what differs between repeats of one error: a script's sha and line, numbers such as job ids. */
export function errorKind(message: string): string {
  return message
    .replace(/ script: .*$/s, '')
    .replace(/\d+/g, 'N')
    .slice(0, 200);
}

export function throttleWarnings(log: Logger, intervalMs: number): WarnThrottle {
  const kinds = new Map<string, Kind>();
  const report = () => {
    for (const [key, kind] of kinds) {
      if (!kind.repeats) kinds.delete(key);
      else {
        log.warn({ err: kind.err, repeats: kind.repeats, intervalMs }, `${kind.what}: the same error ${kind.repeats} more times`);
        kind.repeats = 0;
      }
    }
  };
  const timer = setInterval(report, intervalMs);
  timer.unref();
  return {
    warn(what, err) {
      let key = `${what}\0${errorKind(err.message)}`;
      if (!kinds.has(key) && kinds.size >= MAX_KINDS) key = `${what}\0(other errors)`;
      const kind = kinds.get(key);
      if (kind) {
        kind.repeats++;
        kind.err = err.message;
        return;
      }
      kinds.set(key, { what, err: err.message, repeats: 0 });
      log.warn({ err: err.message }, what);
    },
    /** Reports the repeats counted so far. */
    close() {
      clearInterval(timer);
      report();
    },
  };
}
