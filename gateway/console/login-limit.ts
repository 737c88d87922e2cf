// How many failed logins the dashboard takes before it refuses more for a while: per address
// (one machine guessing many names) and per name (many machines guessing one password). Counted
// in Redis, in fixed windows, so that every dashboard process of a deployment (and one that
// restarted) shares the counts: two dashboards give an attacker no more guesses than one. A
// refused attempt checks no password.
//
// Each attempt is counted as it is taken, before its password is checked (one script: read both
// counts, refuse past either limit, else INCR both and start a window on a new key with PEXPIRE),
// so concurrent guesses cannot all pass a check made before any of them is counted. A right
// password then takes its attempt back: its name's count is cleared and its address's lowered by
// one.
//
// When Redis cannot be reached the login is refused (503), not let through uncounted: a login
// that cannot count failures would allow unlimited guesses. The rest of the dashboard needs Redis
// as well (bull-board, the live view and the queue counts fail without it), signed-in sessions
// and the admin API's tokens go on working (PostgreSQL), so refusing new logins costs little.
import { hash } from 'node:crypto';
import type { Config } from '../../platform/config.ts';
import type { Redis } from '../../platform/redis.ts';

export interface LoginLimits {
  /** Failed logins of one name per window. */
  perName: number;
  /** Failed logins from one address per window. */
  perAddress: number;
  windowMs: number;
}

export const LOGIN_LIMITS: LoginLimits = { perName: 5, perAddress: 20, windowMs: 15 * 60_000 };

/** Redis could not count the attempt: the login is refused (fail closed). */
export class LoginLimitUnavailable extends Error {}

export interface LoginLimit {
  /**
   * Takes one attempt of `name` from `address`: 0 when it may be tried (it counts as a failure
   * until `succeeded`), else the milliseconds until one may be tried again (nothing counted).
   * Throws LoginLimitUnavailable when Redis does not answer.
   */
  attempt(address: string, name: string): Promise<number>;
  /** A right password: clears its name's failures and takes its attempt off its address's. */
  succeeded(address: string, name: string): Promise<void>;
}

/**
 * The keys of one attempt, under the queue prefix like the project's other keys; on a Redis
 * Cluster every login key shares the hash tag `{<prefix>:login}`, so the script's two keys lie
 * in one slot. A name is stored as a hash (lower-cased first: names are matched that way), so the
 * key's length does not depend on what was typed and no operator name is kept in Redis.
 */
export function loginLimitKeys(
  config: Pick<Config, 'queuePrefix'> & { redisClusterNodes?: readonly string[] },
  address: string,
  name: string,
): { address: string; name: string } {
  const prefix = config.redisClusterNodes?.length ? `{${config.queuePrefix}:login}` : `${config.queuePrefix}:login`;
  return {
    address: `${prefix}:address:${address}`,
    name: `${prefix}:name:${hash('sha256', name.toLowerCase(), 'base64url').slice(0, 22)}`,
  };
}

/** What the script read before counting: each key's failures and its window's milliseconds left (PTTL: negative when none). */
export interface WindowCounts {
  address: number;
  addressTtlMs: number;
  name: number;
  nameTtlMs: number;
}

/**
 * Milliseconds until a login may be tried again, 0 when it may now: the longest wait of the
 * limits reached. A key at its limit with no expiry (which the script never leaves) waits a whole
 * window rather than forever.
 */
export function waitOf(limits: LoginLimits, counts: WindowCounts): number {
  const wait = (failures: number, ttlMs: number, max: number) => (failures < max ? 0 : ttlMs > 0 ? ttlMs : limits.windowMs);
  return Math.max(wait(counts.address, counts.addressTtlMs, limits.perAddress), wait(counts.name, counts.nameTtlMs, limits.perName));
}

// KEYS: address, name. ARGV: perAddress, perName, windowMs. Returns the counts and PTTLs read,
// and 1 when the attempt was counted (both below their limits), else 0. Fixed windows: a key's
// expiry is set when it is made and never moved; one without an expiry gets one.
const ATTEMPT_SCRIPT = `
local a = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(redis.call('GET', KEYS[2]) or '0')
local at = redis.call('PTTL', KEYS[1])
local nt = redis.call('PTTL', KEYS[2])
if a >= tonumber(ARGV[1]) or n >= tonumber(ARGV[2]) then return {a, at, n, nt, 0} end
for _, key in ipairs(KEYS) do
  redis.call('INCR', key)
  if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, ARGV[3]) end
end
return {a, at, n, nt, 1}`;

// KEYS: address, name. The name's count goes; the address's loses the attempt a right password
// took (never below 0, and a key that expired meanwhile is not made again).
const SUCCEEDED_SCRIPT = `
redis.call('DEL', KEYS[2])
if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then redis.call('DECR', KEYS[1]) end
return 1`;

/** How long an attempt waits for a connection that is not ready yet (a dashboard just started) before it is refused. */
const READY_WAIT_MS = 2000;

type Scripts = {
  intakeLoginAttempt(address: string, name: string, perAddress: number, perName: number, windowMs: number): Promise<number[]>;
  intakeLoginSucceeded(address: string, name: string): Promise<number>;
};

export function createLoginLimit(
  deps: { redis: Redis; config: Pick<Config, 'queuePrefix'> & { redisClusterNodes?: readonly string[] } },
  overrides: Partial<LoginLimits> = {},
): LoginLimit {
  const limits = { ...LOGIN_LIMITS, ...overrides };
  const { redis, config } = deps;
  redis.defineCommand('intakeLoginAttempt', { numberOfKeys: 2, lua: ATTEMPT_SCRIPT });
  redis.defineCommand('intakeLoginSucceeded', { numberOfKeys: 2, lua: SUCCEEDED_SCRIPT });
  const scripts = redis as unknown as Scripts;

  /** The connection once ready: the dashboard's fails commands at once while it is not (no offline queue). */
  async function ready(): Promise<void> {
    if (redis.status === 'ready') return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        redis.off('ready', done);
        resolve();
      };
      const timer = setTimeout(done, READY_WAIT_MS);
      redis.on('ready', done);
    });
  }

  return {
    async attempt(address, name) {
      const keys = loginLimitKeys(config, address, name);
      let reply: number[];
      try {
        await ready();
        reply = await scripts.intakeLoginAttempt(keys.address, keys.name, limits.perAddress, limits.perName, limits.windowMs);
      } catch (err) {
        throw new LoginLimitUnavailable(`failed logins cannot be counted: ${(err as Error).message}`);
      }
      const [address_, addressTtlMs, name_, nameTtlMs, counted] = reply.map(Number);
      if (counted === 1) return 0;
      return Math.max(1, waitOf(limits, { address: address_, addressTtlMs, name: name_, nameTtlMs }));
    },
    async succeeded(address, name) {
      const keys = loginLimitKeys(config, address, name);
      await scripts.intakeLoginSucceeded(keys.address, keys.name);
    },
  };
}
