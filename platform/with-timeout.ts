export class TimeoutError extends Error {}

/**
 * `work`, or a TimeoutError after `ms`. The work is not cancelled: callers whose work may land
 * late must be idempotent (every caller here is: jobs have deterministic ids).
 */
export function withTimeout<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(message)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** Whether a readiness probe succeeds within a second. */
export function answersWithinASecond(probe: Promise<unknown>): Promise<boolean> {
  return withTimeout(probe, 1000, 'no answer').then(
    () => true,
    () => false,
  );
}

export interface Readiness {
  ready: boolean;
  /** /readyz's body: `status`, whether `postgres` and `redis` answer, and a `reason` while Redis is full. */
  body: { status: 'ready' | 'unavailable'; postgres: boolean; redis: boolean; reason?: string };
}

/**
 * What every process's /readyz reports: PostgreSQL and Redis each answer within a second and,
 * where `memory` is given, Redis is not full (platform/redis-memory.ts; its `reason` says why).
 */
export async function readiness(deps: {
  db: { $queryRaw(query: TemplateStringsArray): Promise<unknown> };
  redis: { ping(): Promise<unknown> };
  memory?: { reason(): string | null };
}): Promise<Readiness> {
  const [postgres, redis] = await Promise.all([answersWithinASecond(deps.db.$queryRaw`SELECT 1`), answersWithinASecond(deps.redis.ping())]);
  const full = redis ? (deps.memory?.reason() ?? null) : null;
  const ready = postgres && redis && full === null;
  return { ready, body: { status: ready ? 'ready' : 'unavailable', postgres, redis, ...(full === null ? {} : { reason: full }) } };
}
