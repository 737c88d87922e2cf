// Everything a run starts is stopped when it ends: normally, on a failure, and on Ctrl-C. Each
// resource registers how to stop it (async, bounded) and, for the process's last moments on
// 'exit', a synchronous last resort (SIGKILL by pid).

interface Resource {
  label: string;
  stop: () => Promise<unknown>;
  /** What can still be done synchronously while the process exits. */
  stopNow?: () => void;
}

const resources: Resource[] = [];
let stopping: Promise<void> | null = null;

/** Registers a resource; returns a function that forgets it (once stopped the usual way). */
export function onCleanup(label: string, stop: () => Promise<unknown>, stopNow?: () => void): () => void {
  const resource = { label, stop, stopNow };
  resources.push(resource);
  return () => {
    const i = resources.indexOf(resource);
    if (i >= 0) resources.splice(i, 1);
  };
}

/** Stops every registered resource, the latest first, none for longer than `eachMs`. */
export function cleanupAll(eachMs = 15_000): Promise<void> {
  stopping ??= (async () => {
    while (resources.length) {
      const r = resources.pop()!;
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise((resolve) => (timer = setTimeout(resolve, eachMs)));
      await Promise.race([Promise.resolve().then(r.stop), bound]).catch((err: unknown) =>
        process.stderr.write(`chaos: stopping ${r.label}: ${(err as Error)?.message ?? err}\n`),
      );
      clearTimeout(timer);
    }
  })().finally(() => (stopping = null));
  return stopping;
}

let installed = false;

/** Ctrl-C and SIGTERM stop everything, then exit 130 / 143; 'exit' kills what is left. */
export function installSignalHandlers(): void {
  if (installed) return;
  installed = true;
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    process.once(signal, () => {
      process.stderr.write(`chaos: ${signal}: stopping every server and process of the run\n`);
      void cleanupAll(5_000).finally(() => process.exit(code));
    });
  }
  process.once('exit', () => {
    for (const r of resources.splice(0).reverse()) {
      try {
        r.stopNow?.();
      } catch {
        // Already gone.
      }
    }
  });
}
