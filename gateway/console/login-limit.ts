// How many failed logins the dashboard takes before it refuses more for a while: per address
// (one machine guessing many names) and per name (many machines guessing one password). Counted
// in the dashboard process's memory, in fixed windows; a refused attempt checks no password.
export interface LoginLimits {
  /** Failed logins of one name per window. */
  perName: number;
  /** Failed logins from one address per window. */
  perAddress: number;
  windowMs: number;
}

export const LOGIN_LIMITS: LoginLimits = { perName: 5, perAddress: 20, windowMs: 15 * 60_000 };

/** Names and addresses counted at most: past it the oldest windows are dropped. */
const MAX_KEYS = 10_000;

export interface LoginLimit {
  /** Milliseconds until a login of `name` from `address` may be tried again; 0 when it may now. */
  blocked(address: string, name: string): number;
  failed(address: string, name: string): void;
  /** A right password clears its name's failures (not the address's). */
  succeeded(name: string): void;
}

export function createLoginLimit(overrides: Partial<LoginLimits> = {}, now: () => number = Date.now): LoginLimit {
  const limits = { ...LOGIN_LIMITS, ...overrides };
  const windows = new Map<string, { start: number; failures: number }>();
  const current = (key: string) => {
    const w = windows.get(key);
    if (!w || now() - w.start >= limits.windowMs) return null;
    return w;
  };
  const wait = (key: string, max: number) => {
    const w = current(key);
    return w && w.failures >= max ? w.start + limits.windowMs - now() : 0;
  };
  const count = (key: string) => {
    let w = current(key);
    if (!w) {
      windows.delete(key);
      if (windows.size >= MAX_KEYS) windows.delete(windows.keys().next().value!);
      windows.set(key, (w = { start: now(), failures: 0 }));
    }
    w.failures++;
  };
  return {
    blocked: (address, name) => Math.max(wait(`a:${address}`, limits.perAddress), wait(`n:${name.toLowerCase()}`, limits.perName)),
    failed(address, name) {
      count(`a:${address}`);
      count(`n:${name.toLowerCase()}`);
    },
    succeeded: (name) => void windows.delete(`n:${name.toLowerCase()}`),
  };
}
