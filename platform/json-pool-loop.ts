// The loop of a json-pool.ts thread: run the named task, post its result (or its error's message).
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { JSON_TASKS } from '../gateway/json-tasks.ts';

// Background work yields the CPU to the event loop that answers everyone: on Linux a thread
// has its own scheduling priority, set through its thread id (/proc/thread-self/…/task/<tid>).
// Elsewhere the thread keeps the process's priority.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 10);
} catch {
  // not Linux, or not permitted: no harm
}

const port = parentPort!;
port.on('message', ({ task, args }: { task: keyof typeof JSON_TASKS; args: unknown[] }) => {
  try {
    port.postMessage({ value: (JSON_TASKS[task] as (...a: unknown[]) => unknown)(...args) });
  } catch (err) {
    port.postMessage({ error: err instanceof Error ? err.message : String(err) });
  }
});
