// The loop of a json-pool.ts thread: import the pool's task table (workerData.tasks), then run
// the named task of each message and post its result (or its error's message).
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type { JsonTaskTable } from './json-pool.ts';

// Background work yields the CPU to the event loop that answers everyone: on Linux a thread
// has its own scheduling priority, set through its thread id (/proc/thread-self/…/task/<tid>).
// Elsewhere the thread keeps the process's priority.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 10);
} catch {
  // not Linux, or not permitted: no harm
}

// Messages that arrive meanwhile wait on the port: it delivers none before the listener below.
const { JSON_TASKS } = (await import((workerData as { tasks: string }).tasks)) as { JSON_TASKS: JsonTaskTable };
const port = parentPort!;
port.on('message', ({ task, args }: { task: string; args: unknown[] }) => {
  try {
    port.postMessage({ value: (JSON_TASKS.tasks[task] as (...a: unknown[]) => unknown)(...args) });
  } catch (err) {
    port.postMessage({ error: err instanceof Error ? err.message : String(err) });
  }
});
