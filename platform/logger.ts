import { pino, type Logger } from 'pino';

export type { Logger };

const WARN = 40;

/** Lines wait at most this long in the buffer before they are written. */
const FLUSH_MS = 200;

/** Characters of log lines handed to the file writer at once. */
const CHUNK_CHARS = 8192;

/**
 * One JSON line per record on stdout; API keys never reach a log (redacted by path).
 * Writes are asynchronous and buffered (8 KB or FLUSH_MS, whichever comes first): a write per
 * line cost the gateway a fifth of its CPU per Track call (a system call and a thread pool
 * round trip each); a warning or an error is written at once. Shutdown flushes (cli/intake.ts),
 * and so does the process's exit.
 */
export function createLogger(level: string, name: string): Logger {
  const destination = pino.destination({ dest: 1, sync: false, minLength: CHUNK_CHARS / 2 });
  const lines = new LineBatch(destination, CHUNK_CHARS);
  // Every tick, even when nothing new was logged: sonic-boom drops a flush that finds a write in
  // flight, and what was buffered meanwhile waits for the next one.
  setInterval(() => lines.flush(), FLUSH_MS).unref();
  return loggerTo(lines, level, name);
}

/** What createLogger makes, writing to `lines` (tests give an array's writer). */
export function loggerTo(lines: LineBatch, level: string, name: string): Logger {
  const time = isoTimeOncePerMs();
  const log = pino(
    {
      name,
      level,
      base: { process: name, pid: process.pid },
      timestamp: time,
      redact: ['req.headers["x-api-key"]', 'req.headers.authorization', 'key'],
      hooks: {
        logMethod(args, method, level) {
          method.apply(this, args);
          if (level >= WARN) lines.flush();
        },
      },
    },
    lines,
  );
  // pino's start of an info line with these bindings ({"level":30, time, base, name), for infoLine.
  infoLines.set(log, { lines, time, bindings: `,"process":${JSON.stringify(name)},"pid":${process.pid},"name":${JSON.stringify(name)}` });
  return log;
}

const infoLines = new WeakMap<Logger, { lines: LineBatch; time: () => string; bindings: string }>();

/** Holds what `log` writes (LineBatch.hold); a logger made elsewhere writes as it does. */
export function holdLines(log: Logger, ms: number): () => void {
  return infoLines.get(log)?.lines.hold(ms) ?? (() => {});
}

/** A log line's fields that infoLine writes itself: flat, plain values, under keys that are plain identifiers. */
export type PlainFields = Record<string, string | number | boolean | null>;

/**
 * log.info(fields), written without pino's serializer: the same line (level, time, bindings,
 * then the fields in order), for flat plain values, which need no redaction. A request's log
 * line through pino costs the gateway measurably in Identify's tail latency. Resolved once per logger (a hot path calls the writer per request); a logger
 * made elsewhere gets log.info.
 */
export function infoLine(log: Logger): (fields: PlainFields) => void {
  const fast = infoMembers(log);
  if (!fast) return (fields) => log.isLevelEnabled('info') && log.info(fields);
  return (fields) => {
    if (!fast.enabled()) return;
    let members = '';
    for (const key in fields) members += `,"${key}":${plainJson(fields[key])}`;
    fast.write(members);
  };
}

/** A plain value as pino writes it. */
export function plainJson(v: string | number | boolean | null): string {
  return typeof v === 'string' ? JSON.stringify(v) : typeof v === 'number' && !Number.isFinite(v) ? 'null' : String(v);
}

/** Writes info lines whose members a hot path has written itself (each `,"key":value`, as plainJson writes values). */
export interface InfoMembers {
  enabled(): boolean;
  write(members: string): void;
}

/** The line writer of a logger createLogger made (null for one made elsewhere): infoLine without a fields object to walk. */
export function infoMembers(log: Logger): InfoMembers | null {
  const fast = infoLines.get(log);
  if (!fast) return null;
  return {
    enabled: () => log.isLevelEnabled('info'),
    write: (members) => void fast.lines.write(`{"level":30${fast.time()}${fast.bindings}${members}}\n`),
  };
}

/** The file writer's side of a LineBatch: sonic-boom's. */
interface ChunkWriter {
  write(chunk: string): boolean;
  flush(cb?: (err?: Error) => void): void;
}

const unwritten = new Set<LineBatch>();
let exitHooked = false;

/**
 * pino's destination: lines are kept in an array and handed to sonic-boom `chunkChars` at a
 * time. sonic-boom appends each write to its pending text and measures that text's UTF-8
 * length on every call, which copied the whole pending buffer once per line: the largest
 * allocation of a Track request (~2.3 KB of its ~19 KB, sampling heap profiler), all of it
 * young garbage that the scavenges had to skip past or promote.
 */
export class LineBatch {
  private lines: string[] = [];
  private chars = 0;
  private held = false;

  constructor(
    private readonly writer: ChunkWriter,
    private readonly chunkChars: number,
  ) {
    unwritten.add(this);
    // Before sonic-boom's own exit handler writes what it holds: the lines still here go first, held or not.
    if (!exitHooked) process.prependListener('exit', () => unwritten.forEach((b) => b.release()));
    exitHooked = true;
  }

  write(line: string): boolean {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= this.chunkChars) this.handOver();
    return true;
  }

  /** Hands every line over and asks the writer to write what it holds now. */
  flush(cb?: (err?: Error) => void): void {
    this.handOver();
    this.writer.flush(cb);
  }

  /**
   * Keeps every line (warnings too) until the returned function is called, or `ms` have passed,
   * whichever comes first; the process's exit writes them all the same. `npm start` holds its
   * start-up lines this way until its summary for a human is out (cli/intake.ts).
   */
  hold(ms: number): () => void {
    this.held = true;
    const timer = setTimeout(() => this.release(), ms).unref();
    return () => {
      clearTimeout(timer);
      this.release();
    };
  }

  release(): void {
    this.held = false;
    this.handOver();
  }

  handOver(): void {
    if (this.held || this.lines.length === 0) return;
    const chunk = this.lines.join('');
    this.lines = [];
    this.chars = 0;
    this.writer.write(chunk);
  }
}

/**
 * pino's isoTime, formatted once per millisecond: a busy gateway writes about ten lines a
 * millisecond, and `toISOString` was a fifth of pino's cost per line.
 */
export function isoTimeOncePerMs(): () => string {
  let last = -1;
  let text = '';
  return () => {
    const now = Date.now();
    if (now !== last) {
      last = now;
      text = `,"time":"${new Date(now).toISOString()}"`;
    }
    return text;
  };
}
