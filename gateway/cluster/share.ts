// What one process of a multi-process gateway (GATEWAY_PROCESSES) may use. The bounds an
// operator sets for "one gateway" (PostgreSQL connections, requests in hand and bodies being
// read, in total and per environment, Identify batches applied at once, the caches' memory) stay
// bounds of the whole `intake gateway`: each process takes its share, rounded up. The primary
// hands connections out in turn, so one environment's requests spread over the processes like
// everyone's, and its part divided keeps its proportion of each process's total. So more
// processes neither multiply PostgreSQL connections nor let one command hold more requests or
// cached entries in memory than configured (each process caches what it sees, so a key or a
// profile may be held by several). Batch sizes (TRACK_BATCH_MAX, TRACK_BATCH_BYTES,
// IDENTIFY_BATCH_MAX) bound one batch, which one process forms: they apply as set.
import type { Config } from '../../platform/config.ts';

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
    maxInFlightPerEnvironment: shareOf(config.maxInFlightPerEnvironment, processes),
    maxUploads: shareOf(config.maxUploads, processes),
    maxUploadsPerEnvironment: shareOf(config.maxUploadsPerEnvironment, processes),
    identifyBatchesInFlight: shareOf(config.identifyBatchesInFlight, processes),
    identifyCacheMb: shareOf(config.identifyCacheMb, processes),
    keyCacheMb: shareOf(config.keyCacheMb, processes),
  };
}

/**
 * JSON threads of one process (platform/json-pool.ts): the cores shared out, less the process's
 * own event loop, from 1 to 4. One process keeps the pool's default (cores − 1, at most 4); N
 * processes on N cores get one each, so the gateway's threads never outnumber the cores by more
 * than its event loops do. Threads start only when a large body needs one.
 */
export function jsonThreadsPerProcess(cores: number, processes: number): number {
  return Math.max(1, Math.min(4, Math.floor(cores / Math.max(1, processes)) - 1));
}
