import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * One JSON line per record on stdout; API keys never reach a log (redacted by path).
 * Writes are asynchronous so a line per request or job does not block the event loop.
 */
export function createLogger(level: string, name: string): Logger {
  return pino(
    {
      name,
      level,
      base: { process: name, pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: ['req.headers["x-api-key"]', 'req.headers.authorization', 'key'],
    },
    pino.destination({ dest: 1, sync: false }),
  );
}
