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

/** What every process's /readyz reports: PostgreSQL and Redis each answer within a second. */
export async function readiness(deps: { db: { $queryRaw(query: TemplateStringsArray): Promise<unknown> }; redis: { ping(): Promise<unknown> } }) {
  const [postgres, redis] = await Promise.all([answersWithinASecond(deps.db.$queryRaw`SELECT 1`), answersWithinASecond(deps.redis.ping())]);
  return { postgres, redis };
}
