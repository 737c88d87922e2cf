// Redis's memory and whether it is full, as gateways and workers both expose them: the watch's
// last reading (platform/redis-memory.ts), so a scrape never asks Redis.
import { Gauge, type Registry } from 'prom-client';
import type { RedisMemory } from './redis-memory.ts';

export const REDIS_MEMORY_METRICS = {
  used: 'intake_redis_memory_used_bytes',
  max: 'intake_redis_memory_max_bytes',
  oom: 'intake_redis_oom',
} as const;

export function registerRedisMemory(registry: Registry, memory: Pick<RedisMemory, 'reading' | 'full'>): void {
  const registers = [registry];
  // Every process of a multi-process gateway reads the same Redis: its scrape takes the largest
  // (gateway/cluster/collect-metrics.ts). A reading gauge shows nothing while Redis did not answer.
  const readingGauge = (name: string, help: string, figure: (reading: NonNullable<ReturnType<RedisMemory['reading']>>) => number) =>
    new Gauge({
      name,
      help,
      registers,
      aggregator: 'max',
      collect() {
        const reading = memory.reading();
        this.reset();
        if (reading) this.set(figure(reading));
      },
    });
  readingGauge(
    REDIS_MEMORY_METRICS.used,
    "Redis's used_memory (INFO memory, read every REDIS_MEMORY_CHECK_MS; absent when Redis did not answer the last reading)",
    (r) => r.usedBytes,
  );
  readingGauge(REDIS_MEMORY_METRICS.max, "Redis's maxmemory (0: no limit), read with intake_redis_memory_used_bytes", (r) => r.maxBytes);
  new Gauge({
    name: REDIS_MEMORY_METRICS.oom,
    help: 'Whether Redis is full (1) or not (0): used_memory at the high-water mark (REDIS_HIGH_WATER_PERCENT of maxmemory, where Track answers 503), or Redis refusing writes for memory (OOM)',
    registers,
    aggregator: 'max',
    collect() {
      this.set(memory.full() ? 1 : 0);
    },
  });
}
