// A server's figures over its alternating rounds, each the median of its own rounds (the issues'
// "medians of three 10 s rounds"). One round's p99 swings by tens of percent on these shared
// VMs (a stall of the machine in one round), so a round's p99 is not taken as the server's just
// because that round's throughput was the median one; the per-round figures are printed too.

export function medianOf(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
}

/** The round of median throughput (its errors and CPU figures), with p50 and p99 the medians of all rounds. */
export function medianRound<T extends { reqPerSec: number; p50: number; p99: number }>(runs: T[]): T {
  const byThroughput = [...runs].sort((a, b) => a.reqPerSec - b.reqPerSec)[Math.floor(runs.length / 2)];
  return { ...byThroughput, p50: medianOf(runs.map((r) => r.p50)), p99: medianOf(runs.map((r) => r.p99)) };
}

/** Each round's throughput and p99, for the report's `runs` column. */
export function roundsText(runs: { reqPerSec: number; p99: number }[]): string {
  return runs.map((r) => `${r.reqPerSec} (p99 ${r.p99})`).join(' / ');
}
