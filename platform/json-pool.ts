// Runs JSON work off the event loop when its input is large: pure functions of strings, which
// the caller passes in (a task table names them for the threads: gateway/json-tasks.ts). A few
// milliseconds of JSON work per request is fine on the event loop; a 4 MB body of a bad shape takes hundreds of
// milliseconds to seconds in JSON.parse and serialization alone, during which a gateway
// would answer nothing else (health probes, other callers' Track with its 2 s enqueue bound).
// Small input (every ordinary request) runs inline: handing it to a thread costs more than
// the work. Threads start on first use, and one that dies (out of memory on a hostile body)
// fails only its own tasks and is replaced on the next.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { nestsDeeperThan } from './json-text.ts';

/** A pure function whose arguments and result cross threads by copy (strings, small flat objects). */
export type JsonTask = (...args: never[]) => unknown;

/**
 * The tasks a pool's threads can run. A thread imports `url` (the table module's own
 * import.meta.url, so the build finds its compiled file) and looks the task up by its key in
 * that module's `JSON_TASKS.tasks`.
 */
export interface JsonTaskTable {
  url: string;
  tasks: Readonly<Record<string, JsonTask>>;
  /**
   * Tasks that run inside a transaction, holding row locks until they end: they go before any
   * body waiting to be decoded, so a burst of large bodies cannot keep a transaction open
   * towards its timeout.
   */
  urgent: readonly JsonTask[];
}

export interface JsonWork {
  /** Whether work on these texts runs on the caller's thread (run would settle at once): the caller may then call the task itself. */
  inline(...texts: unknown[]): boolean;
  /** Runs the task where its string arguments' size says. */
  run<F extends JsonTask>(task: F, ...args: Parameters<F>): Promise<ReturnType<F>>;
  /** As run, with the caller naming the texts the task's cost grows with (for arguments that are not strings). */
  runFor<F extends JsonTask>(texts: readonly string[], task: F, ...args: Parameters<F>): Promise<ReturnType<F>>;
  /** How many tasks were handed to a thread so far. */
  threaded(): number;
  close(): Promise<void>;
}

/**
 * Input under this many characters runs inline, unless it nests deeper than INLINE_JSON_DEPTH.
 * Measured on this project's VM: a 14 KB body of 1,900 keys decodes in ~1 ms; a 16 KB body
 * nested 8,000 levels took ~45 ms (JSON.stringify's RangeError at the stack limit alone is
 * ~40 ms), 1,000 levels stay under a millisecond. A round trip to a thread costs ~0.1–0.3 ms.
 */
export const INLINE_JSON_CHARS = 16 * 1024;
export const INLINE_JSON_DEPTH = 1000;
// Text shorter than this cannot nest deeper than INLINE_JSON_DEPTH (two characters a level).
const DEPTH_SCAN_CHARS = 2 * INLINE_JSON_DEPTH;

/** Everything on the caller's thread (the CLI, the workers, unit tests). */
export const inlineJsonWork: JsonWork = {
  inline: () => true,
  run: (task, ...args) => runInline(task, args),
  runFor: (_texts, task, ...args) => runInline(task, args),
  threaded: () => 0,
  close: async () => {},
};

// Every Track and Identify request runs here: an already-settled promise, no executor or resolving functions.
function runInline<F extends JsonTask>(task: F, args: unknown[]): Promise<ReturnType<F>> {
  try {
    return Promise.resolve((task as unknown as (...a: unknown[]) => ReturnType<F>)(...args));
  } catch (err) {
    return Promise.reject(err);
  }
}

interface Task {
  /** The task's key in the table. */
  task: string;
  args: unknown[];
  resolve(value: unknown): void;
  reject(err: Error): void;
}

interface Thread {
  worker: Worker;
  /** The task it runs; a thread takes one at a time, so the pool can choose which goes next. */
  current: Task | null;
}

export interface JsonPoolOptions {
  /** Worker threads (default: one less than the cores, at least 1, at most 4). */
  threads?: number;
  inlineChars?: number;
}

// A thread does not inherit the main thread's loader: from the sources it starts through
// json-pool-thread.js (which registers tsx); compiled, the loop is JavaScript already.
const THREAD_ENTRY = import.meta.url.endsWith('.ts') ? new URL('./json-pool-thread.js', import.meta.url) : new URL('./json-pool-loop.js', import.meta.url);

export function createJsonPool(table: JsonTaskTable, options: JsonPoolOptions = {}): JsonWork {
  // Keyed by the function itself: callers pass what they call, so go-to-definition reaches it.
  const keys = new Map<JsonTask, string>(Object.entries(table.tasks).map(([key, task]) => [task, key]));
  const urgentTasks = new Set(table.urgent);
  const size = options.threads ?? Math.max(1, Math.min(4, availableParallelism() - 1));
  const inlineChars = options.inlineChars ?? INLINE_JSON_CHARS;
  const threads: Thread[] = [];
  const urgent: Task[] = [];
  const waiting: Task[] = [];
  let closed = false;
  let threaded = 0;

  function start(): Thread {
    // A parse of a hostile body may run out of memory: the thread dies, not the gateway.
    const worker = new Worker(THREAD_ENTRY, { workerData: { tasks: table.url }, resourceLimits: { maxOldGenerationSizeMb: 1024 } });
    worker.unref();
    const thread: Thread = { worker, current: null };
    worker.on('message', (m: { value?: unknown; error?: string }) => {
      const task = thread.current;
      thread.current = null;
      if (m.error !== undefined) task?.reject(new Error(`json task failed: ${m.error}`));
      else task?.resolve(m.value);
      dispatch();
    });
    const fail = (err: Error) => {
      const index = threads.indexOf(thread);
      if (index >= 0) threads.splice(index, 1);
      thread.current?.reject(err);
      thread.current = null;
      dispatch();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`json thread exited (${code})`)));
    threads.push(thread);
    return thread;
  }

  function dispatch(): void {
    while (!closed && (urgent.length || waiting.length)) {
      const thread = threads.find((t) => t.current === null) ?? (threads.length < size ? start() : null);
      if (!thread) return;
      const task = (urgent.length ? urgent : waiting).shift()!;
      thread.current = task;
      thread.worker.postMessage({ task: task.task, args: task.args });
    }
  }

  function onThread<F extends JsonTask>(task: F, args: unknown[]): Promise<ReturnType<F>> {
    const key = keys.get(task);
    if (key === undefined) return Promise.reject(new Error(`json task ${task.name} is not in the pool's table (${table.url})`));
    threaded++;
    return new Promise((resolve, reject) => {
      (urgentTasks.has(task) ? urgent : waiting).push({ task: key, args, resolve: resolve as (v: unknown) => void, reject });
      dispatch();
    });
  }

  // `texts`: the task's arguments (run) or the texts the caller names (runFor); isLarge weighs their strings.
  const runOn = <F extends JsonTask>(texts: readonly unknown[], task: F, args: unknown[]) =>
    closed || !isLarge(texts, inlineChars) ? runInline(task, args) : onThread(task, args);
  return {
    inline: (...texts) => closed || !isLarge(texts, inlineChars),
    run: (task, ...args) => runOn(args, task, args),
    runFor: (texts, task, ...args) => runOn(texts, task, args),
    threaded: () => threaded,
    async close() {
      closed = true;
      for (const task of [...urgent.splice(0), ...waiting.splice(0)]) task.reject(new Error('json pool closed'));
      await Promise.all(threads.map((t) => t.worker.terminate()));
    },
  };
}

// Whether a task's input is worth a thread: its strings add up to `inlineChars`, or one of them
// nests deeper than INLINE_JSON_DEPTH (other values are not weighed).
function isLarge(texts: readonly unknown[], inlineChars: number): boolean {
  let chars = 0;
  for (const text of texts) if (typeof text === 'string') chars += text.length;
  if (chars >= inlineChars) return true;
  return texts.some((text) => typeof text === 'string' && text.length > DEPTH_SCAN_CHARS && nestsDeeperThan(text, INLINE_JSON_DEPTH));
}
