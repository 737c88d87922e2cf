/** Poll `probe` until it returns a truthy value or the deadline passes (then the last value). */
export async function eventually<T>(probe: () => Promise<T>, { timeoutMs = 20_000, intervalMs = 100 } = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T;
  for (;;) {
    try {
      last = await probe();
      if (last) return last;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    if (Date.now() > deadline) return last!;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
