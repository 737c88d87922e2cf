// What one process of a multi-process gateway (GATEWAY_PROCESSES) may use. The bounds an
// operator sets for "one gateway" (PostgreSQL connections, requests in hand, Identify batches
// applied at once) stay bounds of the whole `intake gateway`: each process takes its share,
// rounded up. So more processes neither multiply PostgreSQL connections nor let one command
// hold more requests in memory than configured. Batch sizes (TRACK_BATCH_MAX, TRACK_BATCH_BYTES,
// IDENTIFY_BATCH_MAX) bound one batch, which one process forms: they apply as set.
import type { Config } from '../../common/config.ts';

/** One process's share of a gateway-wide bound: rounded up, so never 0 (the sum may pass the bound by up to processes − 1). */
export function shareOf(total: number, processes: number): number {
  return Math.ceil(total / Math.max(1, processes));
}

/** The configuration one of `processes` gateway processes runs with (the configuration itself for one). */
export function processConfig(config: Config, processes: number): Config {
  if (processes <= 1) return config;
  return {
    ...config,
    databasePoolSize: shareOf(config.databasePoolSize, processes),
    maxInFlight: shareOf(config.maxInFlight, processes),
    identifyBatchesInFlight: shareOf(config.identifyBatchesInFlight, processes),
  };
}

/**
 * JSON threads of one process (common/json-pool.ts): the cores shared out, less the process's
 * own event loop, from 1 to 4. One process keeps the pool's default (cores − 1, at most 4); N
 * processes on N cores get one each, so the gateway's threads never outnumber the cores by more
 * than its event loops do. Threads start only when a large body needs one.
 */
export function jsonThreadsPerProcess(cores: number, processes: number): number {
  return Math.max(1, Math.min(4, Math.floor(cores / Math.max(1, processes)) - 1));
}
